"""Optimizers for pretraining and fine-tuning: AdamW, LAMB or Adam on a `WarmupDecay` schedule.

Each is a Keras 3 optimizer configured through its own arguments:
decoupled weight decay (`weight_decay`, skipping LayerNorm and bias variables
through `exclude_from_weight_decay(var_names=NO_DECAY_PATTERNS)`; the `AdamW`
and `Lamb` here only add those patterns to the saved config), clipping by
global norm (`global_clipnorm`) and gradient accumulation
(`gradient_accumulation_steps`, which averages the micro-batch gradients).

Mixed precision needs nothing here: under the `"mixed_float16"` policy
`model.compile` wraps the optimizer in a `keras.optimizers.LossScaleOptimizer`
itself (`auto_scale_loss=True`, decided by the *model's* dtype policy), and
`"mixed_bfloat16"` needs no loss scaling. XLA is `model.compile(jit_compile=True)`.

`AdamW` and `Adam` here compute Keras' Adam step, but as one fused
`ResourceApplyAdam` kernel per variable instead of about ten separate
element-wise passes over the weights and both moments, which makes the weight
update faster on a CPU (`_FusedAdamStep`; `benchmarks/adam_update.py` times
both, BUILD.md gives the figures). A sparse
gradient (`IndexedSlices`, from an embedding lookup) is summed into a dense
one first, so a row looked up twice gets Adam's step for its summed gradient;
Keras' own step squares each slice separately there.

On a CPU-only machine, under the `"mixed_bfloat16"` policy, a training step traced without
XLA runs each optimizer's whole update (clipping, weight decay, every variable's step) as one
XLA computation (`_UpdatesAsOneXlaIsland`, `kerasbert.xla_islands`); float32 steps, steps
compiled with XLA, eager calls and mirrored strategies run Keras' code as it is.

All three take `lr_multipliers`, `{variable.path: factor}`: each named
variable learns at its factor times the scheduled rate, weight decay included
(see `_ScalesLearningRatesPerVariable`;
`kerasbert.training.layerwise.layerwise_lr_multipliers` computes ELECTRA's
layer-wise decay). The factors are part of the optimizer's config, so they
come back with a compiled model loaded from a `.keras` file.
"""

import math
import numbers
from collections.abc import Mapping

import keras
import tensorflow as tf

from kerasbert.training.schedules import WarmupDecay
from kerasbert.xla_islands import makes_islands

# Regular expressions `re.search`-ed in a variable's name. On the TensorFlow
# backend Keras matches the `tf.Variable` name, which is the full path, e.g.
# "transformer_layer_0/attention_layer_norm/gamma:0" (".../gamma/replica_1:0"
# for a mirrored copy), so these pick out exactly this project's LayerNorm
# scales and offsets ("layer_norm", "attention_layer_norm",
# "output_layer_norm") and every variable named "bias"; kernels and embeddings
# keep their decay.
NO_DECAY_PATTERNS = (r"layer_norm/gamma\b", r"layer_norm/beta\b", r"\bbias\b")


class _ExcludesNormsAndBiasesFromDecay:
    """Calls `exclude_from_weight_decay` with `no_decay_patterns` and keeps them in `get_config`.

    Stock Keras optimizers do not serialize their exclusions, so a model loaded
    from a `.keras` file would otherwise go on decaying LayerNorm and bias.
    """

    def __init__(self, *args, no_decay_patterns=NO_DECAY_PATTERNS, **kwargs):
        super().__init__(*args, **kwargs)
        self.no_decay_patterns = tuple(no_decay_patterns)
        self.exclude_from_weight_decay(var_names=list(self.no_decay_patterns))

    def get_config(self):
        return {**super().get_config(), "no_decay_patterns": list(self.no_decay_patterns)}


def _checked_lr_multipliers(lr_multipliers):
    """`lr_multipliers` as a plain `{path: float}` dict, or a `ValueError` naming the bad entry."""
    if lr_multipliers is None:
        return {}
    if not isinstance(lr_multipliers, Mapping):
        raise ValueError(f"lr_multipliers must map variable paths to factors, got "
                         f"{type(lr_multipliers).__name__}")
    checked = {}
    for path, factor in lr_multipliers.items():
        if not isinstance(path, str):
            raise ValueError(f"lr_multipliers keys must be variable paths (str), got {path!r}")
        if (isinstance(factor, bool) or not isinstance(factor, numbers.Real)
                or not math.isfinite(factor) or factor <= 0):
            raise ValueError(f"lr_multipliers[{path!r}] must be a finite number > 0, "
                             f"got {factor!r}")
        checked[path] = float(factor)
    return checked


class _ScalesLearningRatesPerVariable:
    """Scales the learning rate of each variable named in `lr_multipliers` by its factor.

    `lr_multipliers` maps a variable's `path` (as `keras.Variable.path`, e.g.
    `"transformer_layer_0/attention/query/kernel"`) to a factor > 0; variables
    it does not name keep factor 1. At every step a variable learns at
    `factor * scheduled rate`, and so does its decoupled weight decay:
    `w -= factor * lr * weight_decay * w`, as in ELECTRA's fine-tuning, where
    the per-layer rate multiplies the whole update. `get_config` keeps the
    factors. Building the optimizer raises `ValueError` if a named path is not
    among the variables it trains, so factors never go silently unused (e.g.
    on a model whose layers were renamed).

    Keras decays all variables in one pass before the updates
    (`_apply_weight_decay`, at the global rate). With factors, each variable is
    decayed in its own `update_step` right before its update instead: the same
    arithmetic, since a variable's decay and update touch only that variable.
    Without factors nothing changes.
    """

    def __init__(self, *args, lr_multipliers=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lr_multipliers = _checked_lr_multipliers(lr_multipliers)

    def build(self, variables):
        unknown = sorted(set(self.lr_multipliers) - {variable.path for variable in variables})
        if unknown:
            raise ValueError(
                f"lr_multipliers name {len(unknown)} path(s) that are not among the "
                f"{len(variables)} variables this optimizer trains, e.g. {unknown[0]!r}")
        super().build(variables)

    def _apply_weight_decay(self, variables):
        if not self.lr_multipliers:
            super()._apply_weight_decay(variables)

    def update_step(self, gradient, variable, learning_rate):
        if self.lr_multipliers:
            path = self._trainable_variables[self._get_variable_index(variable)].path
            learning_rate = (tf.cast(learning_rate, variable.dtype)
                             * self.lr_multipliers.get(path, 1.0))
            if self.weight_decay is not None and self._use_weight_decay(variable):
                weight_decay = tf.cast(self.weight_decay, variable.dtype)
                variable.assign_sub(variable * weight_decay * learning_rate)
        return super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        return {**super().get_config(), "lr_multipliers": dict(self.lr_multipliers) or None}


class _UpdatesAsOneXlaIsland:
    """`apply` as one XLA computation where `kerasbert.xla_islands.makes_islands` says so for
    the global dtype policy's compute dtype (the variables and their updates stay float32).

    Keras' update outside XLA runs a kernel per term: the squared norm of every gradient, the
    clipping product, the weight decay's product and subtraction, then the Adam step, each a
    pass over 110M weights for BERT-base. Compiled together, XLA fuses them into a few passes
    per variable. The arithmetic is Keras' (this calls its `apply`), the step counter and the
    learning-rate schedule included. The optimizer is built first, outside the computation,
    so that its slots are never created inside it.
    """

    def apply(self, grads, trainable_variables=None):
        if not makes_islands(keras.config.dtype_policy().compute_dtype):
            return super().apply(grads, trainable_variables)
        if trainable_variables is not None and not self.built:
            self.build(list(trainable_variables))
        apply_outside = super().apply
        tf.function(lambda gradients: apply_outside(gradients, trainable_variables),
                    jit_compile=True)(list(grads))


class _FusedAdamStep:
    """Keras' Adam update of one variable as a single `tf.raw_ops.ResourceApplyAdam` kernel.

    The kernel computes what `keras.optimizers.Adam.update_step` does, with the
    same bias correction (`alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)`,
    `t = iterations + 1`) and epsilon outside the square root:
    `m += (g - m)(1 - beta_1)`, `v += (g^2 - v)(1 - beta_2)`,
    `w -= alpha m / (sqrt(v) + epsilon)`, but reads and writes the weight and
    both moments once, on all cores, where Keras runs one operation per term.
    The kernel also exists under XLA, and the step runs per replica inside
    `tf.distribute` updates as Keras' does. AMSGrad keeps Keras' own step.
    """

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        step = tf.cast(self.iterations + 1, dtype)

        def constant(value):
            return tf.cast(value, dtype)

        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=self._momentums[index].value.handle,
            v=self._velocities[index].value.handle,
            beta1_power=tf.pow(constant(self.beta_1), step),
            beta2_power=tf.pow(constant(self.beta_2), step),
            lr=constant(learning_rate), beta1=constant(self.beta_1),
            beta2=constant(self.beta_2), epsilon=constant(self.epsilon),
            grad=tf.convert_to_tensor(tf.cast(gradient, dtype)))


@keras.saving.register_keras_serializable(package="kerasbert")
class Adam(_UpdatesAsOneXlaIsland, _ScalesLearningRatesPerVariable, _FusedAdamStep,
           keras.optimizers.Adam):
    """`keras.optimizers.Adam` with the fused update of `_FusedAdamStep`.

    Takes `keras.optimizers.Adam`'s arguments plus `lr_multipliers`
    (`{variable path: factor}`, see `_ScalesLearningRatesPerVariable`).

    Example:
    >>> import numpy as np
    >>> weight = keras.Variable(np.ones(3, "float32"))
    >>> optimizer = Adam(learning_rate=0.1)
    >>> _ = optimizer.apply_gradients([(np.array([1.0, -1.0, 0.0], "float32"), weight)])
    >>> [round(float(w), 4) for w in weight.numpy()]
    [0.9, 1.1, 1.0]
    """


@keras.saving.register_keras_serializable(package="kerasbert")
class AdamW(_UpdatesAsOneXlaIsland, _ScalesLearningRatesPerVariable,
            _ExcludesNormsAndBiasesFromDecay, _FusedAdamStep, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` without decay on variables matching `no_decay_patterns`.

    Takes `keras.optimizers.AdamW`'s arguments plus `no_decay_patterns`
    (regular expressions, default `NO_DECAY_PATTERNS`), which `get_config` keeps,
    and `lr_multipliers` (`{variable path: factor}`, see
    `_ScalesLearningRatesPerVariable`). The Adam step is fused (`_FusedAdamStep`).

    Example:
    >>> optimizer = AdamW(learning_rate=1e-3, weight_decay=0.01)
    >>> AdamW.from_config(optimizer.get_config()).no_decay_patterns == NO_DECAY_PATTERNS
    True
    """


@keras.saving.register_keras_serializable(package="kerasbert")
class Lamb(_UpdatesAsOneXlaIsland, _ScalesLearningRatesPerVariable,
           _ExcludesNormsAndBiasesFromDecay, keras.optimizers.Lamb):
    """`keras.optimizers.Lamb` without decay on variables matching `no_decay_patterns`.

    Takes `keras.optimizers.Lamb`'s arguments plus `no_decay_patterns`
    (regular expressions, default `NO_DECAY_PATTERNS`), which `get_config` keeps,
    and `lr_multipliers` (`{variable path: factor}`, see
    `_ScalesLearningRatesPerVariable`: a factor scales the rate outside the
    trust ratio).

    Keras' LAMB applies the decay decoupled (`w -= lr * weight_decay * w` before
    the step, outside the trust ratio) and its trust ratio to every variable.

    Example:
    >>> optimizer = Lamb(learning_rate=1e-3, weight_decay=0.01)
    >>> Lamb.from_config(optimizer.get_config()).no_decay_patterns == NO_DECAY_PATTERNS
    True
    """


_OPTIMIZERS = {"adamw": AdamW, "lamb": Lamb, "adam": Adam}


def create_optimizer(name="adamw", learning_rate=1e-4, *, num_train_steps, num_warmup_steps=0,
                     weight_decay=0.01, end_learning_rate=0.0, power=1.0, beta_1=0.9,
                     beta_2=0.999, epsilon=1e-6, global_clipnorm=1.0,
                     gradient_accumulation_steps=None, lr_multipliers=None):
    """A Keras optimizer on a `WarmupDecay` schedule, as used for BERT-family pretraining.

    Args:
        name: `"adamw"` (`AdamW`: Adam with decoupled weight decay),
            `"lamb"` (`Lamb`) or `"adam"` (`Adam`, no weight decay;
            `weight_decay` is not used).
        learning_rate: the peak rate, reached after warmup.
        num_train_steps: total batches `model.fit` trains on (each a
            micro-batch with gradient accumulation: Keras steps the schedule
            per batch, not per update), warmup included; the rate reaches
            `end_learning_rate` there.
        num_warmup_steps: batches of linear warmup from 0.
        weight_decay: decoupled decay rate for `"adamw"` and `"lamb"`; LayerNorm
            and bias variables (`NO_DECAY_PATTERNS`) are excluded.
        end_learning_rate, power: end rate and exponent of the decay.
        beta_1, beta_2, epsilon: the Adam/LAMB moment parameters.
        global_clipnorm: clip gradients to this global norm (`None`: no clipping).
        gradient_accumulation_steps: update the weights every this many
            batches with the average of their gradients (`None`: every batch).
        lr_multipliers: `{variable.path: factor}`: those variables learn (and
            decay) at `factor` times the scheduled rate, e.g.
            `kerasbert.training.layerwise.layerwise_lr_multipliers(model, 0.8)`
            for ELECTRA's layer-wise decay; `None`: one rate for all.

    Example:
    >>> optimizer = create_optimizer("adamw", 1e-3, num_train_steps=100,
    ...                              num_warmup_steps=10)
    >>> type(optimizer).__name__, optimizer.global_clipnorm
    ('AdamW', 1.0)
    >>> round(float(optimizer.learning_rate), 6)  # step 0 of the warmup
    0.0
    >>> create_optimizer("sgd", num_train_steps=10)
    Traceback (most recent call last):
    ...
    ValueError: Unknown optimizer name 'sgd'; choose one of 'adamw', 'lamb', 'adam'
    >>> weight = keras.Variable([1.0, 1.0], name="weight")
    >>> halved = create_optimizer("adam", 0.1, num_train_steps=10, global_clipnorm=None,
    ...                           lr_multipliers={weight.path: 0.5})
    >>> halved.apply([tf.constant([1.0, -1.0])], [weight])
    >>> [round(float(w), 4) for w in weight.numpy()]  # Adam's first step is -lr * sign(g)
    [0.95, 1.05]
    """
    if name not in _OPTIMIZERS:
        choices = ", ".join(repr(choice) for choice in _OPTIMIZERS)
        raise ValueError(f"Unknown optimizer name {name!r}; choose one of {choices}")
    if isinstance(num_train_steps, bool) or not isinstance(num_train_steps, int) \
            or num_train_steps < 1:
        raise ValueError(f"num_train_steps must be an integer >= 1, got {num_train_steps!r}")
    if isinstance(num_warmup_steps, bool) or not isinstance(num_warmup_steps, int) \
            or not 0 <= num_warmup_steps <= num_train_steps:
        raise ValueError(f"num_warmup_steps must be an integer in [0, num_train_steps="
                         f"{num_train_steps}], got {num_warmup_steps!r}")
    schedule = WarmupDecay(learning_rate, warmup_steps=num_warmup_steps,
                           decay_steps=num_train_steps - num_warmup_steps,
                           end_learning_rate=end_learning_rate, power=power)
    decay = {} if name == "adam" else {"weight_decay": weight_decay}
    return _OPTIMIZERS[name](
        learning_rate=schedule, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
        global_clipnorm=global_clipnorm, gradient_accumulation_steps=gradient_accumulation_steps,
        lr_multipliers=lr_multipliers, **decay)
