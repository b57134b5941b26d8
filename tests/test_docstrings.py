"""Every docstring example in the library runs, and every public class has one."""

import doctest
import importlib
import inspect
import pkgutil

import pytest

import kerasbert

# zoo/ and export/ are installed as kerasbert.zoo / kerasbert.export from outside kerasbert/.
PACKAGES = (kerasbert, kerasbert.zoo, kerasbert.export)
MODULES = sorted(
    info.name for package in PACKAGES
    for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + ".")
    if ".cli." not in info.name and not info.name.endswith(".rebuild"))
# Modules whose examples export, train or read a corpus (over 3 s each in `python
# tools/suite_profile.py`'s table): in CI, not in the quick loop (`pytest -m "not slow"`).
SLOW_MODULES = {
    "kerasbert.data.glue", "kerasbert.data.pretraining", "kerasbert.data.swag",
    "kerasbert.export.choice_answers", "kerasbert.export.entity_answers",
    "kerasbert.export.exporter", "kerasbert.export.onnx_fusions", "kerasbert.export.onnx_model",
    "kerasbert.export.onnx_runtime_variants", "kerasbert.export.question_answers",
    "kerasbert.export.saved_model", "kerasbert.export.text_tflite",
    "kerasbert.training.distillation.task"}


@pytest.mark.parametrize("module_name", [
    pytest.param(name, marks=pytest.mark.slow) if name in SLOW_MODULES else name
    for name in MODULES])
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{module_name}: {result.failed} docstring example(s) failed"
    for name, value in vars(module).items():
        public_class = (inspect.isclass(value) and value.__module__ == module_name
                        and not name.startswith("_") and not issubclass(value, BaseException))
        if public_class:
            assert ">>>" in (value.__doc__ or ""), f"{module_name}.{name} has no runnable example"
