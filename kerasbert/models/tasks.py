"""Fine-tuning models: an encoder with a classification, tagging, span or multiple-choice head."""

from collections.abc import Mapping

import keras

from kerasbert import families
from kerasbert.config import EncoderConfig
from kerasbert.layers.activations import get_activation
from kerasbert.layers.choices import FoldChoices, UnfoldChoiceLogits
from kerasbert.layers.dropout import Dropout
from kerasbert.layers.sentence_pooling import SentencePooling
from kerasbert.models.batch_dicts import BatchDictTraining, restore_compile
from kerasbert.models.embedding import TextEmbeddingModel
from kerasbert.models.encoder import INPUT_NAMES, Encoder, build_encoder

# The kinds of fine-tuning model `build_task_model` makes (its `task` argument).
TASK_MODEL_KINDS = ("sequence_classification", "token_classification", "question_answering",
                    "multiple_choice")
IGNORED_LABEL = -100  # token labels that neither the loss nor the metrics count
TEXT_EMBEDDING = "text_embedding"  # `build_task_model`'s task for a `TextEmbeddingModel`
# How a classification or multiple-choice head reads a first-token summary: that token, or the
# mean of the tokens (ModernBERT's `classifier_pooling="mean"`).
TASK_POOLINGS = ("first_token", "mean")


def needs_pooler(family, task):
    """Whether `task`'s head of `family` reads the encoder's pooled output.

    >>> needs_pooler("bert", "sequence_classification"), needs_pooler("roberta", "question_answering")
    (True, False)
    """
    head = families.get(family).model.summary_heads.get(task)
    return head is not None and head.reads_pooler


def _default_num_labels(task):
    return {"question_answering": 2, "multiple_choice": 1}.get(task, 2)


def _label_names(id2label, num_labels):
    """`id2label` (a mapping or a list, or None) as `{int: str}` with exactly `num_labels` ids."""
    if id2label is None:
        return {index: f"LABEL_{index}" for index in range(num_labels)}
    if not isinstance(id2label, Mapping):
        id2label = dict(enumerate(id2label))
    names = {int(index): str(name) for index, name in id2label.items()}
    if sorted(names) != list(range(num_labels)):
        raise ValueError(f"id2label must name the label ids 0..{num_labels - 1}, got ids "
                         f"{sorted(names)}")
    return names


@keras.saving.register_keras_serializable(package="kerasbert")
class TaskModel(BatchDictTraining, keras.Model):
    """An encoder with a fine-tuning head, as one functional Keras model.

    Inputs: the encoder's int32 `token_ids`, `segment_ids`, `padding_mask`,
    `[batch, seq]` (`[batch, choices, seq]` for multiple choice). Outputs, by
    task:

    - `sequence_classification`: `logits` `[batch, num_labels]` (regression
      when `num_labels=1`);
    - `token_classification`: `logits` `[batch, seq, num_labels]`;
    - `question_answering`: `start_logits`, `end_logits` `[batch, seq]`;
    - `multiple_choice`: `logits` `[batch, choices]`.

    Heads follow `transformers` per family (`ModelTraits.summary_heads`): BERT and ALBERT
    classify the pooled output; RoBERTa and ELECTRA the first token through
    dense -> tanh / GELU -> dense; multiple choice scores each choice's pooled
    output (ELECTRA: first token, dense, GELU); DistilBERT's classifiers read
    the first token through dense -> ReLU -> dropout -> dense; tagging and spans
    are a dense layer on every token (DistilBERT's span head after dropout).
    Outputs are float32 also under mixed precision.
    `id2label` (label names) is part of the config and saved with the model.
    ModernBERT's heads (`ModelTraits.head_transform`) read every output through a
    dense -> activation -> LayerNorm transform first; its sequence-level heads read the first
    token or, with `pooling="mean"`, the mean of the non-padding tokens.

    The encoder must have a pooler exactly when the head reads it;
    `build_task_model` adapts any encoder. Classification and multiple choice
    heads read one token, so the model is built on the encoder's layers with
    `Encoder.outputs_at_positions`: the last transformer layer runs only for
    that token (the same logits, less work; the encoder stays `model.encoder`,
    sharing every weight).

    Batches of kerasbert's task datasets (a dict with the inputs and `labels`,
    or `start_positions` / `end_positions`) go straight into `fit` and
    `evaluate`; token labels of `IGNORED_LABEL` (-100) are left out of the
    loss and accuracy (under a `tf.distribute` strategy each replica averages
    over its own labelled tokens, as PyTorch DDP and Model Garden do).

    Example:
    >>> import numpy as np, kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> model = TaskModel(encoder, "sequence_classification", num_labels=3,
    ...                   id2label=["negative", "neutral", "positive"])
    >>> ids = np.array([[2, 7, 8, 3, 0]], "int32")
    >>> outputs = model({"token_ids": ids, "segment_ids": np.zeros_like(ids),
    ...                  "padding_mask": (ids != 0).astype("int32")})
    >>> tuple(outputs["logits"].shape), model.id2label[2]
    ((1, 3), 'positive')
    """

    def __init__(self, encoder, task, num_labels=None, id2label=None, dropout=None,
                 pooling="first_token", **kwargs):
        if task not in TASK_MODEL_KINDS:
            raise ValueError(f"task must be one of {TASK_MODEL_KINDS}, got {task!r}")
        if not isinstance(encoder, Encoder):
            raise TypeError(f"encoder must be a kerasbert Encoder, got {type(encoder).__name__}")
        config = encoder.config
        if encoder.config.use_pooler != needs_pooler(config.family, task):
            raise ValueError(
                f"The {config.family} {task} head {'reads' if needs_pooler(config.family, task) else 'does not read'} "
                f"the pooled output, but the encoder {'has' if config.use_pooler else 'has no'} pooler; "
                "build_task_model adds or removes it")
        fixed = {"question_answering": 2, "multiple_choice": 1}.get(task)
        num_labels = num_labels if num_labels is not None else _default_num_labels(task)
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
            raise ValueError(f"num_labels must be a positive integer, got {num_labels!r}")
        if fixed is not None and num_labels != fixed:
            raise ValueError(f"A {task} head has {fixed} output(s) per token or choice; "
                             f"num_labels={num_labels} is not possible")
        if task == "token_classification" and num_labels == 1:
            raise ValueError("token_classification needs num_labels >= 2")
        id2label = _label_names(id2label, num_labels) if fixed is None else None
        dropout = config.dropout if dropout is None else dropout
        if not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        summary = config.family_traits.summary_heads.get(task)
        if pooling not in TASK_POOLINGS:
            raise ValueError(f"pooling must be one of {TASK_POOLINGS}, got {pooling!r}")
        if pooling == "mean" and (summary is None or summary.source != "first_token"):
            raise ValueError(f"pooling='mean' is for heads that read a first-token summary; "
                             f"the {config.family} {task} head does not")
        policy = encoder.dtype_policy
        initializer = keras.initializers.TruncatedNormal(stddev=config.initializer_range)

        # === Layers ===
        head_dropout = Dropout(dropout, dtype=policy, name="head_dropout")
        transform = head_transform(config, policy)
        inner = None
        if summary is not None and summary.inner_activation:
            inner = keras.layers.Dense(config.hidden_size, kernel_initializer=initializer,
                                       dtype=policy, name="classifier_dense")
        output_layer = keras.layers.Dense(
            num_labels, kernel_initializer=initializer, dtype=policy,
            name="qa_outputs" if task == "question_answering" else "classifier")

        # === Functional graph ===
        choices = task == "multiple_choice"
        inputs = {name: keras.Input(shape=(None, None) if choices else (None,), dtype="int32",
                                    name=name) for name in INPUT_NAMES}
        encoder_inputs = inputs
        if choices:
            fold = FoldChoices(name="fold_choices")
            encoder_inputs = {name: fold(inputs[name]) for name in INPUT_NAMES}
        if summary is not None and pooling == "mean":
            summarized = transform(SentencePooling("mean", name="mean_pooling")(
                encoder(encoder_inputs)["sequence_output"], encoder_inputs["padding_mask"]))
        elif summary is not None:
            # The head reads one token: the last layer runs only there (the pooler reads the
            # first token; a first-token head asks for position 0).
            first = encoder_inputs["token_ids"][:, :0 if summary.reads_pooler else 1]
            encoded = encoder.outputs_at_positions(encoder_inputs, keras.ops.zeros_like(first))
            summarized = transform(encoded["pooled_output"] if summary.reads_pooler
                                   else encoded["sequence_output"][:, 0, :])
        if summary is not None:
            if summary.dropout_first:
                summarized = head_dropout(summarized)
            if inner is not None:
                summarized = head_dropout(get_activation(summary.inner_activation)(
                    inner(summarized)))
            logits = keras.ops.cast(output_layer(summarized), "float32")
            if choices:
                logits = UnfoldChoiceLogits(name="unfold_choices")(logits, inputs["token_ids"])
            outputs = {"logits": logits}
        elif task == "token_classification":
            outputs = {"logits": keras.ops.cast(output_layer(head_dropout(transform(
                encoder(encoder_inputs)["sequence_output"]))), "float32")}
        else:
            sequence_output = transform(encoder(encoder_inputs)["sequence_output"])
            if config.family_traits.dropout_before_span_head:
                sequence_output = head_dropout(sequence_output)
            span_logits = keras.ops.cast(output_layer(sequence_output), "float32")
            outputs = {"start_logits": span_logits[..., 0], "end_logits": span_logits[..., 1]}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self._input_names = list(INPUT_NAMES)
        self.encoder = encoder
        self.task = task
        self.num_labels = num_labels
        self.id2label = id2label
        self.dropout = dropout
        self.pooling = pooling

    @property
    def label2id(self):
        """`{label name: id}`, the inverse of `id2label` (None for span and choice heads)."""
        return None if self.id2label is None else {name: index for index, name in
                                                    self.id2label.items()}

    @property
    def is_regression(self):
        return self.task == "sequence_classification" and self.num_labels == 1

    # === Training: task batches straight into `fit` ===

    def compile(self, optimizer="adam", loss="auto", metrics="auto", weighted_metrics="auto",
                **kwargs):
        """`keras.Model.compile` with the task's loss and metric by default.

        Classification and multiple choice: cross-entropy and accuracy;
        regression: mean squared error; tagging: cross-entropy averaged over the
        labelled tokens, and their accuracy; spans: the mean of the start and
        end cross-entropies (as `transformers`). Pass any argument to replace
        a default.
        """
        def cross_entropy(reduction="sum_over_batch_size"):
            return keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, ignore_class=IGNORED_LABEL if
                self.task == "token_classification" else None, reduction=reduction)

        def accuracy():
            return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

        if loss == "auto":
            if self.task == "question_answering":
                loss = {"start_logits": cross_entropy(), "end_logits": cross_entropy()}
                kwargs.setdefault("loss_weights", {"start_logits": 0.5, "end_logits": 0.5})
            elif self.is_regression:
                loss = {"logits": keras.losses.MeanSquaredError()}
            else:
                loss = {"logits": cross_entropy(
                    "mean_with_sample_weight" if self.task == "token_classification" else
                    "sum_over_batch_size")}
        labelled_tokens = self.task == "token_classification"
        if weighted_metrics == "auto":
            weighted_metrics = {"logits": accuracy()} if labelled_tokens else None
        if metrics == "auto":
            metrics = (None if labelled_tokens or self.is_regression or
                       self.task == "question_answering" else {"logits": accuracy()})
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics,
                        weighted_metrics=weighted_metrics, **kwargs)

    def compile_from_config(self, config):
        restore_compile(self, config)

    def split_batch(self, batch):
        """A task batch dict -> `(inputs, labels, sample_weights)` for Keras.

        `labels` goes to `logits`; `start_positions` / `end_positions` to
        `start_logits` / `end_logits`. Token labels equal to `IGNORED_LABEL`
        get sample weight 0 (and label 0, which the weight cancels). Anything
        that is not such a dict is returned as it is.
        """
        if not isinstance(batch, dict) or not ({"labels", "start_positions"} & set(batch)):
            return batch
        inputs = {name: batch[name] for name in INPUT_NAMES}
        if self.task == "question_answering":
            return inputs, {"start_logits": batch["start_positions"],
                            "end_logits": batch["end_positions"]}
        labels = batch["labels"]
        if self.task == "token_classification":
            weights = keras.ops.cast(keras.ops.not_equal(labels, IGNORED_LABEL), "float32")
            labels = keras.ops.where(keras.ops.equal(labels, IGNORED_LABEL), 0, labels)
            return inputs, {"logits": labels}, {"logits": weights}
        return inputs, {"logits": labels}

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.layers.serialize(self.encoder),
            "task": self.task,
            "num_labels": self.num_labels,
            "id2label": None if self.id2label is None else {
                str(index): name for index, name in self.id2label.items()},
            "dropout": self.dropout,
            "pooling": self.pooling,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.layers.deserialize(config["encoder"])
        return cls(**config)


def head_transform(config, policy):
    """The dense -> activation -> LayerNorm transform a family's fine-tuning heads start with
    (`ModelTraits.head_transform` names its activation; ModernBERT's `head`), as a callable on
    `[..., hidden]` tensors; the identity for the other families."""
    activation_name = config.family_traits.head_transform
    if activation_name is None:
        return lambda hidden: hidden
    dense = keras.layers.Dense(
        config.hidden_size, use_bias=config.use_bias, dtype=policy, name="head_dense",
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=config.initializer_range))
    layer_norm = keras.layers.LayerNormalization(
        epsilon=config.layer_norm_epsilon, center=config.use_bias, dtype=policy,
        name="head_layer_norm")
    activation = get_activation(activation_name)
    return lambda hidden: layer_norm(activation(dense(hidden)))


def encoder_of(model):
    """The encoder inside an `Encoder`, a pretraining model, an ELECTRA pretrainer (its
    discriminator) or a task model."""
    if isinstance(model, Encoder):
        return model
    for attribute in ("encoder", "discriminator"):
        encoder = getattr(model, attribute, None)
        if isinstance(encoder, Encoder):
            return encoder
    raise TypeError(f"Expected an EncoderConfig, an Encoder or a kerasbert model that holds one, "
                    f"got {type(model).__name__}")


def with_pooler(encoder, use_pooler):
    """`encoder` itself if it has (`use_pooler=True`) or lacks a pooler as asked; otherwise a
    copy of its weights in an encoder with the pooler added (randomly initialised, as
    `transformers` does for a checkpoint without one) or removed."""
    if encoder.config.use_pooler == use_pooler:
        return encoder
    copy = Encoder(encoder.config.replace(use_pooler=use_pooler), dtype=encoder.dtype_policy,
                   name=encoder.name)
    source = {variable.path: variable for variable in encoder.weights}
    for variable in copy.weights:
        if variable.path in source:
            variable.assign(source[variable.path])
    return copy


def build_task_model(encoder_or_config, task, num_labels=None, id2label=None, dropout=None,
                     **kwargs):
    """A `TaskModel` for `task` on an encoder, a pretrained model's encoder, or a config.

    `task="text_embedding"` gives a `TextEmbeddingModel` instead (no pooler;
    its settings, such as `pooling="mean"` and `normalize=True`, come as keyword
    arguments; `num_labels`, `id2label` and `dropout` do not apply).

    `encoder_or_config`: an `EncoderConfig` (a randomly initialised encoder,
    with a pooler only where the head reads it, as `transformers` builds it),
    an `Encoder`, a `PretrainingModel` / `ElectraPretrainer` / `TaskModel`
    (their encoder, weights shared). An encoder whose pooler does not match the
    head is copied with the pooler added (random) or dropped.
    `num_labels` defaults to 2 (1 means regression for
    `sequence_classification`); `dropout` to the encoder's.

    >>> import kerasbert
    >>> config = kerasbert.zoo.get_config("roberta_base").replace(num_layers=1, hidden_size=64,
    ...     num_heads=2, intermediate_size=128)
    >>> model = build_task_model(config, "question_answering")
    >>> sorted(model.output), model.encoder.config.use_pooler
    (['end_logits', 'start_logits'], False)
    """
    if isinstance(encoder_or_config, Mapping):
        encoder_or_config = EncoderConfig.from_dict(dict(encoder_or_config))
    if task not in TASK_MODEL_KINDS + (TEXT_EMBEDDING,):
        raise ValueError(f"task must be one of {TASK_MODEL_KINDS + (TEXT_EMBEDDING,)}, "
                         f"got {task!r}")
    if isinstance(encoder_or_config, EncoderConfig):
        config = encoder_or_config
        encoder = build_encoder(config.replace(use_pooler=needs_pooler(config.family, task)))
    else:
        encoder = encoder_of(encoder_or_config)
        encoder = with_pooler(encoder, needs_pooler(encoder.config.family, task))
    if task == TEXT_EMBEDDING:
        given = {"num_labels": num_labels, "id2label": id2label, "dropout": dropout}
        if any(value is not None for value in given.values()):
            raise ValueError(f"A text_embedding model has no labels or head dropout; got "
                             f"{sorted(name for name, value in given.items() if value is not None)}")
        return TextEmbeddingModel(encoder, **kwargs)
    return TaskModel(encoder, task, num_labels=num_labels, id2label=id2label, dropout=dropout,
                     **kwargs)
