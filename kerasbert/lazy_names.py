"""Package attributes imported on first use (PEP 562), so that importing a package, or one light
module inside it, does not import every heavy module of the package.

    # in a package's __init__.py
    __getattr__, __dir__ = lazy_names(__name__, {"glue": "kerasbert.data.glue",
                                                 "glue_dataset": "kerasbert.data.glue:glue_dataset"})
"""

import importlib
import sys


def lazy_names(package, names):
    """`(__getattr__, __dir__)` for `package` (its module name) whose attribute `name` is the
    module `names[name]` (`"package.module"`) or an attribute of one (`"package.module:attribute"`),
    imported when first used and then kept on the package."""

    def __getattr__(name):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = names[name].partition(":")
        value = importlib.import_module(module)
        if attribute:
            value = getattr(value, attribute)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
