"""`from_google`: a kerasbert model from an original Google TF1 checkpoint of BERT
(google-research/bert), ALBERT (google-research/albert) or ELECTRA (google-research/electra)."""

import os

import tensorflow as tf

from kerasbert import families, file_system
from kerasbert.convert.google_config import (GoogleCheckpointError, electra_generator_config,
                                             encoder_config_from_google, read_google_config)
from kerasbert.convert.google_names import (encoder_name_map, google_families, google_tables,
                                            head_name_map, head_scopes, is_skipped,
                                            query_kernel_name)
from kerasbert.convert.weights import assign_weights
from kerasbert.models.encoder import build_encoder
from kerasbert.models.pretraining import PretrainingModel

# Config files looked for beside a checkpoint prefix when none is given, in this order.
CONFIG_FILE_NAMES = ("bert_config.json", "albert_config.json", "config.json")
ELECTRA_MODELS = ("discriminator", "generator")


def is_checkpoint_prefix(path):
    """Whether `path` is the prefix of a TF checkpoint (`<path>.index` exists).

    >>> is_checkpoint_prefix("/no/such/bert_model.ckpt")
    False
    """
    return file_system.isfile(os.fspath(path) + ".index")


def config_beside(checkpoint_prefix):
    """The config file in the checkpoint's folder: the first of `CONFIG_FILE_NAMES` there.

    >>> config_beside("/no/such/bert_model.ckpt")
    Traceback (most recent call last):
    ...
    kerasbert.convert.google_config.GoogleCheckpointError: /no/such/bert_model.ckpt: no config ...
    """
    directory = file_system.dirname(file_system.absolute(checkpoint_prefix))
    for name in CONFIG_FILE_NAMES:
        path = file_system.join(directory, name)
        if file_system.isfile(path):
            return path
    raise GoogleCheckpointError(
        f"{checkpoint_prefix}: no config file beside it (looked for "
        f"{', '.join(CONFIG_FILE_NAMES)} in {directory}); pass config_json")


def from_google(checkpoint_prefix, config_json=None, encoder_only=False, family=None,
                electra_model="discriminator"):
    """Import an original Google TF1 checkpoint as a kerasbert model with its weights.

    Args:
        checkpoint_prefix: the checkpoint's prefix, e.g. `.../bert_model.ckpt`
            (the path of its `.index` file without the extension), local or a
            TensorFlow file-system URL (`gs://...`), as is `config_json`.
        config_json: the config file (`bert_config.json`, `albert_config.json`,
            or ELECTRA's pretraining hyperparameters as JSON, see
            `kerasbert.convert.google_config`). Default: the first of
            `CONFIG_FILE_NAMES` in the checkpoint's folder.
        encoder_only: return just the encoder; every variable outside its
            scope (heads, fine-tuning classifiers) is deliberately left out.
        family: `"bert"`, `"albert"` or `"electra"`. Default: told from the
            variable names: `electra/`, `generator/` or
            `discriminator_predictions/` is ELECTRA; `bert/` is ALBERT when
            `bert/encoder/transformer/` (its layer groups) or
            `bert/encoder/embedding_hidden_mapping_in` is there, else BERT.
        electra_model: which ELECTRA model to import from a checkpoint holding
            both: `"discriminator"` (variables `electra/...`,
            `discriminator_predictions/...`) or `"generator"` (`generator/...`,
            `generator_predictions/...`, the embeddings it shares with the
            discriminator, `electra/embeddings/...`, unless it has its own).
            The other model's variables are left out.

    Returns the `PretrainingModel` (inputs and outputs as `from_hf` gives
    them) with the heads the checkpoint holds: BERT `("mlm", "nsp")`, ALBERT
    `("mlm", "sop")`, ELECTRA's discriminator `("rtd",)`, its generator
    `("mlm",)`; the `Encoder` when it holds no head variables or with
    `encoder_only=True`. The heads' activation is `hidden_act`, as Google's
    pretraining code has it. BERT and ALBERT encoders get their pooler when the
    checkpoint has `bert/pooler` or an NSP / SOP head.

    The generator's hidden size and depth come from the config's
    `generator_hidden_size` / `generator_layers` fractions when given, else
    from its variables' shapes; its heads (hidden // 64) and FFN (4 x hidden)
    follow ELECTRA's code (see `google_config.electra_generator_config`).

    Optimizer slots (`.../adam_m`, `.../adam_v`) and `global_step` are
    skipped. Every other variable must find a kerasbert variable of the same
    shape and every kerasbert variable a checkpoint variable; otherwise
    `WeightMismatchError` lists the differences by name and nothing is loaded.
    A missing checkpoint or config, or a config kerasbert cannot build, raises
    `GoogleCheckpointError` naming the path.

    >>> from_google("/no/such/bert_model.ckpt")
    Traceback (most recent call last):
    ...
    kerasbert.convert.google_config.GoogleCheckpointError: /no/such/bert_model.ckpt: no TF1 ...
    """
    prefix = os.fspath(checkpoint_prefix)
    if not is_checkpoint_prefix(prefix):
        raise GoogleCheckpointError(f"{prefix}: no TF1 checkpoint there (no {prefix}.index)")
    config_path = os.fspath(config_json) if config_json is not None else config_beside(prefix)
    values = read_google_config(config_path)
    reader = _open(prefix)
    shapes = {name: tuple(shape) for name, shape in reader.get_variable_to_shape_map().items()
              if not is_skipped(name)}
    family = family or detect_family(shapes, prefix)
    if family not in google_families():
        raise GoogleCheckpointError(f"{prefix}: family {family!r} is not one of "
                                    f"{sorted(google_families())}")
    tables = google_tables(family)
    if electra_model not in ELECTRA_MODELS or (electra_model != "discriminator"
                                               and not tables.generator_scope):
        raise GoogleCheckpointError(f"{prefix}: electra_model={electra_model!r}; expected one "
                                    f"of {ELECTRA_MODELS}, and 'generator' only for ELECTRA")

    config = encoder_config_from_google(values, family, source=config_path)
    scope = embeddings_scope = tables.scope
    model_heads = families.get(family).model.pretraining_heads
    if electra_model == "generator":
        scope, model_heads = tables.generator_scope, ("mlm",)
        if _has_scope(shapes, f"{scope}/embeddings"):
            embeddings_scope = scope  # trained with untied generator embeddings
        config = electra_generator_config(config, values, _generator_size(shapes, family, scope),
                                          source=config_path)
    heads = () if encoder_only else tuple(
        head for head in model_heads
        if any(_has_scope(shapes, head_scope) for head_scope in head_scopes(family, head)))
    if config.use_pooler:
        config = config.replace(use_pooler=_has_scope(shapes, f"{scope}/pooler")
                                or bool({"nsp", "sop"} & set(heads)))

    encoder = build_encoder(config)
    name_map = encoder_name_map(config, scope, embeddings_scope)
    model = encoder
    if heads:
        model = PretrainingModel(encoder, heads, mlm_activation=config.hidden_activation)
        name_map.update(head_name_map(family, heads))
    if encoder_only:
        wanted = (f"{scope}/", f"{embeddings_scope}/embeddings/")
        names = [name for name in shapes if name in name_map or name.startswith(wanted)]
    else:
        left_out = tables.other_model_scopes.get(electra_model, ())
        names = [name for name in shapes if name in name_map or not name.startswith(left_out)]
    assign_weights(model, _read(reader, prefix, names), name_map, source=f"checkpoint {prefix}")
    return model


def detect_family(names, prefix="checkpoint"):
    """The family whose variable names `names` are (see `from_google`'s `family`).

    >>> detect_family(["bert/encoder/transformer/group_0/inner_group_0/LayerNorm/beta"])
    'albert'
    """
    # The family of the longest marker found: ALBERT's encoder lives under `bert/` too, but only
    # it has `bert/encoder/transformer/` groups and the projection.
    longest_marker = {family: max((len(marker) for marker in google_tables(family).markers
                                   if any(name.startswith(marker) for name in names)), default=0)
                      for family in google_families()}
    best = max(longest_marker, key=longest_marker.get)
    if longest_marker[best]:
        return best
    raise GoogleCheckpointError(
        f"{prefix}: cannot tell BERT, ALBERT or ELECTRA from its variable names "
        f"({sorted(names)[:5]}); pass family=")


def _has_scope(shapes, scope):
    return any(name == scope or name.startswith(scope + "/") for name in shapes)


def _generator_size(shapes, family, scope):
    """`(hidden_size, num_layers)` of the generator variables under `scope`, or None."""
    num_layers = 0
    while query_kernel_name(family, scope, num_layers) in shapes:
        num_layers += 1
    if not num_layers:
        return None
    return shapes[query_kernel_name(family, scope, 0)][-1], num_layers


def _open(prefix):
    # The reader of exactly this prefix: `tf.train.load_checkpoint` would take a path that
    # TensorFlow's `ram://` calls a folder (any prefix of a file's name) for a checkpoint folder.
    try:
        return tf.compat.v1.train.NewCheckpointReader(prefix)
    except (tf.errors.OpError, ValueError) as error:
        raise GoogleCheckpointError(f"{prefix}: not a readable TF checkpoint ({error})") from None


def _read(reader, prefix, names):
    try:
        return {name: reader.get_tensor(name) for name in names}
    except tf.errors.OpError as error:
        raise GoogleCheckpointError(f"{prefix}: cannot read its variables ({error})") from None
