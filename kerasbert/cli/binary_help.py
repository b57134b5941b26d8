"""What `kerasbert-<binary> --help` (or `-h`, `--helpshort`) prints: the binary's docstring and
every flag it defines itself or shares with other binaries (`kerasbert.cli.*_flags`,
`pretraining_input`), with status 0. absl's own `--help` lists only the flags of the `__main__`
module, which for a console script is the launcher pip wrote, and exits with status 1.
`--helpfull` (every flag, absl's included) is absl's."""

import sys

from absl import flags

HELP_ARGUMENTS = ("--help", "-help", "-h", "--helpshort", "-helpshort", "-?")


def wants_help(argv):
    """Whether the command line (`argv[1:]`, up to a `--`) asks for help."""
    arguments = argv[1:]
    if "--" in arguments:
        arguments = arguments[:arguments.index("--")]
    return any(argument in HELP_ARGUMENTS for argument in arguments)


def binary_help(main_module, program):
    """The help text of the binary whose `main` is in module `main_module` (a name), whose
    flags are defined (only absl's and kerasbert's modules define flags before `main`)."""
    docstring = (sys.modules[main_module].__doc__ or program).strip()
    # Every module but absl's own: the binary's (named by its path when run with `python -m`),
    # first, then the shared ones.
    modules = [name for name in flags.FLAGS.flags_by_module_dict()
               if not name.startswith("absl.")]
    modules.sort(key=lambda name: name.startswith("kerasbert.cli."))
    sections = [flags.FLAGS.module_help(name).strip() for name in modules]
    return "\n\n".join([docstring, *sections,
                        "Try --helpfull to get a list of all flags, absl's included."]) + "\n"
