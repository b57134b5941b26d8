"""Students: smaller encoders initialized from a teacher's weights, DistilBERT's way (Sanh et
al., 2019: the student takes one of every two teacher layers, and the embeddings).

The student's architecture is the teacher's `EncoderConfig` with fewer layers and any other
field changed (`hidden_size`, `embedding_size`, `family`, ...). Weights are copied wherever the
shapes match, unit by unit: each embedding table, the embedding LayerNorm and projection, each
mapped transformer layer as a whole, the pooler, and each part of the heads; the rest keep
their random initialization.

ALBERT shares its layers in groups (`num_hidden_groups` groups of `inner_group_num` layers,
applied `num_layers` times in all): an ALBERT student has fewer applications and takes whole
groups, so its layer map maps groups, not layers.
"""

import math
import numbers

import keras

from kerasbert import families
from kerasbert.config import EncoderConfig
from kerasbert.models.encoder import Encoder
from kerasbert.models.pretraining import PretrainingModel
from kerasbert.models.tasks import TaskModel, build_task_model, encoder_of


def default_layer_map(teacher_num_layers, student_num_layers):
    """Which teacher layer each student layer copies by default: evenly spaced from the first
    to the last teacher layer, rounded to the nearest (halves up); one student layer takes the
    last teacher layer. For 12 -> 6 layers that is DistilBERT's `(0, 2, 4, 7, 9, 11)`: every
    other layer, keeping the last one, whose output the MLM head reads.

    >>> default_layer_map(12, 6)
    (0, 2, 4, 7, 9, 11)
    >>> default_layer_map(4, 2), default_layer_map(6, 3), default_layer_map(4, 1)
    ((0, 3), (0, 3, 5), (3,))
    """
    for name, value in (("teacher_num_layers", teacher_num_layers),
                        ("student_num_layers", student_num_layers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if student_num_layers > teacher_num_layers:
        raise ValueError(f"A student of {student_num_layers} layers cannot take distinct layers "
                         f"from a teacher of {teacher_num_layers}; give a layer map")
    if student_num_layers == 1:
        return (teacher_num_layers - 1,)
    span, steps = teacher_num_layers - 1, student_num_layers - 1
    return tuple((2 * index * span + steps) // (2 * steps) for index in range(student_num_layers))


def student_config(teacher_config, num_layers=None, **overrides):
    """The teacher's config with `num_layers` layers (default: half the teacher's, at least
    one) and `overrides` (any `EncoderConfig` fields).

    For an ALBERT student `num_layers` counts layer applications, and `num_hidden_groups`
    defaults to the greatest common divisor of it and the teacher's group count (the
    teacher's groups when they divide it).

    >>> import kerasbert
    >>> teacher = kerasbert.zoo.get_config("bert_base_uncased")
    >>> config = student_config(teacher)
    >>> config.num_layers, config.hidden_size
    (6, 768)
    >>> student_config(teacher, 4, hidden_size=256, num_heads=4).hidden_size
    256
    """
    if not isinstance(teacher_config, EncoderConfig):
        raise TypeError(f"teacher_config must be an EncoderConfig, got "
                        f"{type(teacher_config).__name__}")
    num_layers = max(1, teacher_config.num_layers // 2) if num_layers is None else num_layers
    fields = {"num_layers": num_layers}
    student_family = overrides.get("family", teacher_config.family)
    if _shares_layers(student_family) and isinstance(num_layers, int):
        fields["num_hidden_groups"] = math.gcd(num_layers, teacher_config.num_hidden_groups)
    fields.update(overrides)
    return teacher_config.replace(**fields)


def copy_encoder_weights(teacher_encoder, student_encoder, layer_map=None):
    """Copy the teacher's weights into the student wherever the shapes match.

    `layer_map[i]` is the teacher layer that student layer `i` copies (ALBERT: the teacher
    group that student group `i` copies); default `default_layer_map`. Returns `{student
    part: teacher part}` of what was copied (paths such as `transformer_layer_1`,
    `embeddings/token_embedding`); mapped layers of another shape are not copied.

    >>> import kerasbert
    >>> teacher = kerasbert.zoo.build("bert_tiny_uncased", vocab_size=100)
    >>> student = kerasbert.zoo.build("bert_tiny_uncased", vocab_size=100, num_layers=1)
    >>> copied = copy_encoder_weights(teacher, student)
    >>> copied["transformer_layer_0"]
    'transformer_layer_1'
    """
    teacher_blocks, teacher_block_size = _blocks(teacher_encoder.config)
    student_blocks, student_block_size = _blocks(student_encoder.config)
    unit = "group" if teacher_encoder.config.family_traits.shares_layers else "layer"
    if layer_map is None:
        layer_map = default_layer_map(teacher_blocks, student_blocks)
    layer_map = check_layer_map(layer_map, teacher_blocks, student_blocks, unit)
    if teacher_block_size != student_block_size:
        raise ValueError(f"The teacher's ALBERT groups have {teacher_block_size} layers each, "
                         f"the student's {student_block_size}: groups copy only to groups of "
                         "the same inner_group_num")
    copied = _copy_parts(teacher_encoder.embeddings, student_encoder.embeddings)
    for student_block, teacher_block in enumerate(layer_map):
        for inner in range(student_block_size):
            source = teacher_encoder.transformer_layers[teacher_block * teacher_block_size + inner]
            target = student_encoder.transformer_layers[student_block * student_block_size + inner]
            copied.update(_copy_parts(source, target, whole=True))
    if teacher_encoder.pooler is not None and student_encoder.pooler is not None:
        copied.update(_copy_parts(teacher_encoder.pooler, student_encoder.pooler, whole=True))
    return copied


def check_layer_map(layer_map, teacher_count, student_count, unit="layer"):
    """`layer_map` as a tuple of ints, checked: one teacher `unit` per student one, each
    index in range.

    >>> check_layer_map([0, 5], teacher_count=4, student_count=2)
    Traceback (most recent call last):
    ...
    ValueError: layer map index 5 is out of range: the teacher has 4 layers (0..3)
    """
    try:
        layer_map = tuple(layer_map)
    except TypeError:
        raise ValueError(f"layer map must be a sequence of teacher {unit} indices, "
                         f"got {layer_map!r}") from None
    if len(layer_map) != student_count:
        raise ValueError(f"layer map {list(layer_map)} has {len(layer_map)} entries, but the "
                         f"student has {student_count} {unit}s")
    for index in layer_map:
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise ValueError(f"layer map entry {index!r} is not a teacher {unit} index")
        if not 0 <= index < teacher_count:
            raise ValueError(f"layer map index {index} is out of range: the teacher has "
                             f"{teacher_count} {unit}s (0..{teacher_count - 1})")
    return tuple(int(index) for index in layer_map)


def student_encoder(teacher_encoder, num_layers=None, layer_map=None, **overrides):
    """A new `Encoder` of `student_config(teacher.config, num_layers, **overrides)` (in the
    global dtype policy), initialized from the teacher by `copy_encoder_weights` (random where
    nothing matches).

    With a `layer_map` and no `num_layers`, the student has one layer per entry (ALBERT:
    one group per entry, each applied once).

    >>> import kerasbert
    >>> teacher = kerasbert.zoo.build("bert_tiny_uncased", vocab_size=100, num_layers=4)
    >>> student = student_encoder(teacher, layer_map=[1, 2, 3])
    >>> student.config.num_layers
    3
    """
    teacher_encoder = encoder_of(teacher_encoder)
    teacher_config = teacher_encoder.config
    if layer_map is not None:
        layer_map = tuple(layer_map)
        if _shares_layers(overrides.get("family", teacher_config.family)):
            overrides.setdefault("num_hidden_groups", len(layer_map))
        if num_layers is None:
            num_layers = len(layer_map)
    config = student_config(teacher_config, num_layers, **overrides)
    student = Encoder(config)
    copy_encoder_weights(teacher_encoder, student, layer_map)
    return student


def copy_heads(teacher_model, student_model):
    """Copy the heads of a teacher pretraining or task model into a student's, part by part
    (a dense layer, a LayerNorm, a bias) where names and shapes match; the tied MLM decoder
    is the student's own token embedding. Returns `{student part: teacher part}`.

    >>> import kerasbert
    >>> teacher = kerasbert.models.build_pretraining_model(
    ...     kerasbert.zoo.get_config("bert_tiny_uncased", vocab_size=100), heads=("mlm",))
    >>> student = kerasbert.models.PretrainingModel(student_encoder(teacher), heads=("mlm",))
    >>> sorted(copy_heads(teacher, student))
    ['mlm_head', 'mlm_head/dense', 'mlm_head/layer_norm']
    """
    teacher_heads = _head_layers(teacher_model)
    copied = {}
    for name, target in _head_layers(student_model).items():
        if name in teacher_heads:
            copied.update(_copy_parts(teacher_heads[name], target,
                                      skip=_variable_ids(student_model.encoder)))
    return copied


def student_pretraining_model(teacher, num_layers=None, layer_map=None, **overrides):
    """A student `PretrainingModel` with the MLM head of `teacher` (a `PretrainingModel` with
    an `mlm` head), encoder and head initialized from the teacher's.

    The student has no pooler unless `use_pooler=True` is among the overrides: the MLM head
    does not read it, so it would not train (fine-tuning adds one where a head reads it, as
    for a `transformers` `*ForMaskedLM` checkpoint).

    >>> import kerasbert
    >>> teacher = kerasbert.models.build_pretraining_model(
    ...     kerasbert.zoo.get_config("bert_tiny_uncased", vocab_size=100, num_layers=4))
    >>> student = student_pretraining_model(teacher)
    >>> student.heads, student.encoder.config.num_layers
    (('mlm',), 2)
    """
    if not isinstance(teacher, PretrainingModel) or "mlm" not in teacher.heads:
        raise ValueError(f"The teacher must be a pretraining model with an MLM head; "
                         f"{_describe(teacher)} has none")
    overrides.setdefault("use_pooler", False)
    encoder = student_encoder(teacher.encoder, num_layers, layer_map, **overrides)
    student = PretrainingModel(encoder, ("mlm",), mlm_activation=teacher.mlm_activation)
    copy_heads(teacher, student)
    return student


def student_task_model(teacher, num_layers=None, layer_map=None, **overrides):
    """A student `TaskModel` of the teacher's task and labels (a fine-tuned `TaskModel`),
    encoder and head initialized from the teacher's where the shapes match.

    >>> import kerasbert
    >>> teacher = kerasbert.models.build_task_model(
    ...     kerasbert.zoo.get_config("bert_tiny_uncased", vocab_size=100, num_layers=4),
    ...     "sequence_classification", num_labels=3)
    >>> student = student_task_model(teacher)
    >>> student.num_labels, student.encoder.config.num_layers
    (3, 2)
    """
    if not isinstance(teacher, TaskModel):
        raise ValueError(f"The teacher must be a fine-tuned task model; got {_describe(teacher)}")
    encoder = student_encoder(teacher.encoder, num_layers, layer_map, **overrides)
    student = build_task_model(
        encoder, teacher.task, num_labels=teacher.num_labels,
        id2label=None if teacher.id2label is None else
        [teacher.id2label[index] for index in range(teacher.num_labels)],
        dropout=teacher.dropout)
    copy_heads(teacher, student)
    return student


def _shares_layers(family):
    """Whether `family` shares its layers in groups (ALBERT); False for a name that is no family,
    which `EncoderConfig` then rejects with its own message."""
    return family in families.NAMES and families.get(family).model.shares_layers


def _blocks(config):
    """(how many units a layer map maps, transformer layers per unit) for an encoder config."""
    if config.family_traits.shares_layers:
        return config.num_hidden_groups, config.inner_group_num
    return config.num_distinct_layers, 1


def _head_layers(model):
    """The layers of `model` that are not part of its encoder, by name."""
    encoder_variables = _variable_ids(encoder_of(model))
    return {layer.name: layer for layer in model.layers
            if any(id(variable) not in encoder_variables for variable in layer.weights)}


def _variable_ids(layer):
    return {id(variable) for variable in layer.weights}


def _copy_parts(source, target, whole=False, skip=()):
    """Copy `source`'s weights into `target`'s by their paths inside each layer, a part (the
    weights of one sub-layer, or of the whole layer with `whole`) at a time, and only if every
    weight of the part exists with the same shape. Variables in `skip` are left alone."""
    def parts(layer):
        grouped = {}
        for variable in layer.weights:
            if id(variable) in skip or not variable.path.startswith(layer.path + "/"):
                continue  # skipped, or shared with (and so copied through) another layer
            inner = variable.path[len(layer.path) + 1:]
            part = "" if whole else inner.rpartition("/")[0]
            grouped.setdefault(part, {})[inner] = variable
        return grouped

    source_parts = parts(source)
    copied = {}
    for part, variables in parts(target).items():
        theirs = source_parts.get(part)
        if theirs is None or set(theirs) != set(variables) or any(
                tuple(theirs[name].shape) != tuple(variable.shape)
                for name, variable in variables.items()):
            continue
        for name, variable in variables.items():
            variable.assign(keras.ops.cast(theirs[name], variable.dtype))
        copied["/".join(filter(None, (target.name, part)))] = "/".join(
            filter(None, (source.name, part)))
    return copied


def _describe(model):
    heads = getattr(model, "heads", None)
    return f"{type(model).__name__}" + (f" with heads {list(heads)}" if heads else "")
