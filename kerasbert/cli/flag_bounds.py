"""Bounds that absl's inclusive `lower_bound` / `upper_bound` cannot say: a float flag that must be
more than 0 (epochs, a learning rate, a temperature). A value out of bounds fails while the flags
are parsed, in one line naming the flag (`kerasbert.cli.one_line_errors`)."""

from absl import flags


def require_positive(*names):
    """Flags `names` (floats; None allowed) must be more than 0."""
    for name in names:
        flags.register_validator(name, lambda value: value is None or value > 0,
                                 message=f"--{name} must be more than 0")
