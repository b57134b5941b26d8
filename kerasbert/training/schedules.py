"""Learning-rate schedule for pretraining: linear warmup, then polynomial (by default linear) decay."""

import numbers

import keras
from keras import ops


def _check_steps(argument, value, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{argument} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_number(argument, value, positive):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{argument} must be a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{argument} must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


@keras.saving.register_keras_serializable(package="kerasbert")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to a peak, then polynomial decay to an end rate, then constant.

    With `w = warmup_steps` and `d = decay_steps` the rate at step `s` is
    `peak * s / w` for `s < w`, then
    `end + (peak - end) * (1 - min(s - w, d) / d) ** power`; `power=1.0` is
    linear decay. `decay_steps` counts the steps after warmup; `decay_steps=0`
    drops to `end_learning_rate` right after warmup. A Keras optimizer calls the
    schedule with its count of `apply` calls (an int64 tensor; floats work too):
    with gradient accumulation that counts micro-batches, not weight updates
    (`optimizer.iterations` counts updates).

    Args:
        peak_learning_rate: the rate reached at the end of warmup (> 0).
        warmup_steps: steps of linear warmup (>= 0; 0 starts at the peak).
        decay_steps: steps of decay after warmup (>= 0).
        end_learning_rate: the rate after decay (>= 0).
        power: exponent of the polynomial decay (> 0).

    Example:
    >>> schedule = WarmupDecay(1e-3, warmup_steps=10, decay_steps=100,
    ...                        end_learning_rate=1e-5)
    >>> [round(float(schedule(step)), 6) for step in (0, 5, 10, 60, 110, 500)]
    [0.0, 0.0005, 0.001, 0.000505, 1e-05, 1e-05]
    >>> WarmupDecay.from_config(schedule.get_config()).get_config() == schedule.get_config()
    True
    """

    def __init__(self, peak_learning_rate, warmup_steps, decay_steps, end_learning_rate=0.0,
                 power=1.0):
        self.peak_learning_rate = _check_number("peak_learning_rate", peak_learning_rate,
                                                positive=True)
        self.warmup_steps = _check_steps("warmup_steps", warmup_steps, 0)
        self.decay_steps = _check_steps("decay_steps", decay_steps, 0)
        self.end_learning_rate = _check_number("end_learning_rate", end_learning_rate,
                                               positive=False)
        self.power = _check_number("power", power, positive=True)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        peak, end = self.peak_learning_rate, self.end_learning_rate
        if self.decay_steps:
            decayed_fraction = ops.clip((step - self.warmup_steps) / self.decay_steps, 0.0, 1.0)
        else:
            decayed_fraction = ops.ones_like(step)
        decay_rate = end + (peak - end) * ops.power(1.0 - decayed_fraction, self.power)
        if not self.warmup_steps:
            return decay_rate
        warmup_rate = peak * step / self.warmup_steps
        return ops.where(step < self.warmup_steps, warmup_rate, decay_rate)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "decay_steps": self.decay_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
        }
