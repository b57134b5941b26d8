"""`from_google` on TF1 checkpoints with the original variable names of Google's BERT, ALBERT and
ELECTRA code, written here from a `transformers` model's weights (the inverse of the mapping
transformers' own TF1 importers applied): every output matches that model."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

import kerasbert
from kerasbert.convert import GoogleCheckpointError, WeightMismatchError, from_google
from kerasbert.convert.google_config import electra_generator_config, encoder_config_from_google
from kerasbert.export.model_sources import load_export_model
from kerasbert.models.encoder import Encoder
from kerasbert.models.pretraining import PretrainingModel
from kerasbert.training.pretrained_sources import pretrained_source
from tests.helpers import (assert_pretraining_outputs_match, hf_config, hf_outputs, masked_positions,
                           random_inputs, save_hf_model)

TOLERANCE = 1e-5


class GoogleVariables:
    """Original TF1 variables filled from a `transformers` state dict; every tensor of the state
    dict must be used, but for the tied decoder copies."""

    def __init__(self, model, prefix):
        self.state = {name: value.detach().numpy() for name, value in model.state_dict().items()}
        self.prefix = prefix  # transformers' base-model prefix: bert. / albert. / electra.
        self.unused = set(self.state)
        self.variables = {}

    def tensor(self, google, hf):
        self.variables[google] = self.state[hf]
        self.unused.discard(hf)

    def dense(self, google, hf):  # torch Linear weight [out, in] -> TF1 dense kernel [in, out]
        self.variables[f"{google}/kernel"] = self.state[f"{hf}.weight"].T
        self.variables[f"{google}/bias"] = self.state[f"{hf}.bias"]
        self.unused -= {f"{hf}.weight", f"{hf}.bias"}

    def layer_norm(self, google, hf):
        self.tensor(f"{google}/gamma", f"{hf}.weight")
        self.tensor(f"{google}/beta", f"{hf}.bias")

    def embeddings(self, scope):
        for table in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            self.tensor(f"{scope}/embeddings/{table}", f"{self.prefix}embeddings.{table}.weight")
        self.layer_norm(f"{scope}/embeddings/LayerNorm", f"{self.prefix}embeddings.LayerNorm")

    def bert_layers(self, scope, count):
        for n in range(count):
            google, hf = f"{scope}/encoder/layer_{n}", f"{self.prefix}encoder.layer.{n}"
            for part in ("query", "key", "value"):
                self.dense(f"{google}/attention/self/{part}", f"{hf}.attention.self.{part}")
            self.dense(f"{google}/attention/output/dense", f"{hf}.attention.output.dense")
            self.layer_norm(f"{google}/attention/output/LayerNorm",
                            f"{hf}.attention.output.LayerNorm")
            self.dense(f"{google}/intermediate/dense", f"{hf}.intermediate.dense")
            self.dense(f"{google}/output/dense", f"{hf}.output.dense")
            self.layer_norm(f"{google}/output/LayerNorm", f"{hf}.output.LayerNorm")

    def done(self, tied=()):
        assert self.unused <= set(tied), f"state dict tensors not written: {sorted(self.unused)}"
        return self.variables


def bert_variables(model, layers=2):
    """BERT's `run_pretraining.py` names for a `BertForPreTraining`."""
    w = GoogleVariables(model, "bert.")
    w.embeddings("bert")
    w.bert_layers("bert", layers)
    w.dense("bert/pooler/dense", "bert.pooler.dense")
    w.dense("cls/predictions/transform/dense", "cls.predictions.transform.dense")
    w.layer_norm("cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm")
    w.tensor("cls/predictions/output_bias", "cls.predictions.bias")
    w.tensor("cls/seq_relationship/output_weights", "cls.seq_relationship.weight")  # [2, H]
    w.tensor("cls/seq_relationship/output_bias", "cls.seq_relationship.bias")
    return w.done(tied=("cls.predictions.decoder.weight", "cls.predictions.decoder.bias"))


def albert_variables(model, groups, inner_layers):
    """ALBERT's names for an `AlbertForPreTraining`."""
    w = GoogleVariables(model, "albert.")
    w.embeddings("bert")
    w.dense("bert/encoder/embedding_hidden_mapping_in",
            "albert.encoder.embedding_hidden_mapping_in")
    for group in range(groups):
        for inner in range(inner_layers):
            google = f"bert/encoder/transformer/group_{group}/inner_group_{inner}"
            hf = f"albert.encoder.albert_layer_groups.{group}.albert_layers.{inner}"
            for part in ("query", "key", "value"):
                w.dense(f"{google}/attention_1/self/{part}", f"{hf}.attention.{part}")
            w.dense(f"{google}/attention_1/output/dense", f"{hf}.attention.dense")
            w.layer_norm(f"{google}/LayerNorm", f"{hf}.attention.LayerNorm")
            w.dense(f"{google}/ffn_1/intermediate/dense", f"{hf}.ffn")
            w.dense(f"{google}/ffn_1/intermediate/output/dense", f"{hf}.ffn_output")
            w.layer_norm(f"{google}/LayerNorm_1", f"{hf}.full_layer_layer_norm")
    w.dense("bert/pooler/dense", "albert.pooler")
    w.dense("cls/predictions/transform/dense", "predictions.dense")
    w.layer_norm("cls/predictions/transform/LayerNorm", "predictions.LayerNorm")
    w.tensor("cls/predictions/output_bias", "predictions.bias")
    w.tensor("cls/seq_relationship/output_weights", "sop_classifier.classifier.weight")
    w.tensor("cls/seq_relationship/output_bias", "sop_classifier.classifier.bias")
    return w.done(tied=("predictions.decoder.weight", "predictions.decoder.bias"))


def electra_variables(discriminator, generator, layers=2):
    """One ELECTRA pretraining checkpoint: the discriminator (`ElectraForPreTraining`) and the
    generator (`ElectraForMaskedLM`), which reads the discriminator's embedding tables."""
    w = GoogleVariables(discriminator, "electra.")
    w.embeddings("electra")
    w.dense("electra/embeddings_project", "electra.embeddings_project")
    w.bert_layers("electra", layers)
    w.dense("discriminator_predictions/dense", "discriminator_predictions.dense")
    w.dense("discriminator_predictions/dense_1", "discriminator_predictions.dense_prediction")
    variables = w.done()
    g = GoogleVariables(generator, "electra.")
    for name in [name for name in g.state if name.startswith("electra.embeddings.")]:
        np.testing.assert_array_equal(g.state[name], w.state[name])  # shared, as written
        g.unused.discard(name)
    g.dense("generator/embeddings_project", "electra.embeddings_project")
    g.bert_layers("generator", layers)
    g.dense("generator_predictions/dense", "generator_predictions.dense")
    g.layer_norm("generator_predictions/LayerNorm", "generator_predictions.LayerNorm")
    g.tensor("generator_predictions/output_bias", "generator_lm_head.bias")
    return {**variables, **g.done(tied=("generator_lm_head.weight",))}


def write_checkpoint(prefix, variables):
    """A TF1 (name-based) checkpoint holding exactly `variables`, as `tf.compat.v1.train.Saver`
    writes them: `<prefix>.index` and `<prefix>.data-00000-of-00001`."""
    names = sorted(variables)
    tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(variables[name]) for name in names])
    return str(prefix)


def google_config(config, **extra):
    """The `bert_config.json` keys of a `transformers` config."""
    keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "hidden_act", "hidden_dropout_prob",
            "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
            "initializer_range")
    return {**{key: getattr(config, key) for key in keys}, **extra}


def write_json(path, values):
    path.write_text(json.dumps(values))
    return str(path)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """A BERT checkpoint (with Adam slots and global_step, as training leaves them), its
    `bert_config.json` beside it, and the transformers model it came from."""
    directory = tmp_path_factory.mktemp("bert")
    config = hf_config("bert")
    reference = save_hf_model("BertForPreTraining", config, directory / "hf")
    variables = bert_variables(reference)
    rng = np.random.default_rng(0)
    training_state = {f"{name}/{slot}": rng.normal(size=value.shape).astype("float32")
                      for name, value in variables.items() for slot in ("adam_m", "adam_v")}
    training_state["global_step"] = np.int64(1000)
    config_path = write_json(directory / "bert_config.json", google_config(config))
    prefix = write_checkpoint(directory / "bert_model.ckpt", {**variables, **training_state})
    return SimpleNamespace(prefix=prefix, config=config_path, variables=variables,
                           reference=reference)


def test_bert_pretraining_model_matches_transformers(bert):
    model = from_google(bert.prefix)  # bert_config.json found beside the prefix
    assert isinstance(model, PretrainingModel) and model.heads == ("mlm", "nsp")
    assert_pretraining_outputs_match(model, bert.reference, {"prediction_logits": "mlm_logits",
                                      "seq_relationship_logits": "nsp_logits"})


def test_encoder_only_and_a_checkpoint_without_heads_give_the_encoder(bert, tmp_path):
    bare = write_checkpoint(tmp_path / "bare.ckpt", {
        name: value for name, value in bert.variables.items() if name.startswith("bert/")})
    for encoder in (from_google(bert.prefix, encoder_only=True), from_google(bare, bert.config)):
        assert isinstance(encoder, Encoder) and encoder.config.use_pooler
        inputs = random_inputs(encoder.config, batch=3, seq=9)
        expected = hf_outputs(bert.reference.bert, inputs)
        outputs = encoder(inputs)
        np.testing.assert_allclose(outputs["sequence_output"], expected.last_hidden_state,
                                   rtol=0, atol=TOLERANCE)
        np.testing.assert_allclose(outputs["pooled_output"], expected.pooler_output, rtol=0,
                                   atol=TOLERANCE)


def test_albert_shares_layers_in_groups_and_has_the_sop_head(tmp_path):
    # 4 layer applications over 2 groups of 2 distinct layers; Google's "gelu" is ALBERT's tanh
    # GELU (gelu_new), which the config must turn into.
    overrides = dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    config = hf_config("albert", **overrides)
    reference = save_hf_model("AlbertForPreTraining", config, tmp_path / "hf")
    prefix = write_checkpoint(tmp_path / "model.ckpt-best", albert_variables(reference, 2, 2))
    config_path = write_json(tmp_path / "albert_config.json", google_config(
        config, hidden_act="gelu", embedding_size=16, num_hidden_groups=2, inner_group_num=2,
        net_structure_type=0, gap_size=0, num_memory_blocks=0, down_scale_factor=1))
    model = from_google(prefix, config_path)
    assert model.heads == ("mlm", "sop") and model.encoder.config.num_distinct_layers == 4
    assert model.encoder.config.hidden_activation == "gelu_new"
    assert_pretraining_outputs_match(model, reference, {"prediction_logits": "mlm_logits",
                                      "sop_logits": "sop_logits"})


@pytest.fixture(scope="module")
def electra(tmp_path_factory):
    """An ELECTRA checkpoint with both models; its config is ELECTRA's pretraining
    hyperparameters (`model_size` + overrides, generator at half the hidden size)."""
    import torch

    directory = tmp_path_factory.mktemp("electra")
    discriminator = save_hf_model("ElectraForPreTraining", hf_config("electra", embedding_size=24),
                                  directory / "discriminator")
    generator = save_hf_model(
        "ElectraForMaskedLM", hf_config("electra", embedding_size=24, hidden_size=16,
                                        num_attention_heads=1, intermediate_size=64),
        directory / "generator", seed=1)
    with torch.no_grad():  # the generator reads the discriminator's embeddings
        shared = discriminator.electra.embeddings.state_dict()
        generator.electra.embeddings.load_state_dict(shared)
    prefix = write_checkpoint(directory / "electra_small",
                              electra_variables(discriminator, generator))
    config = write_json(directory / "hparams.json", {
        "model_size": "small", "vocab_size": 120, "embedding_size": 24,
        "generator_hidden_size": 0.5,
        "model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 2,
                                   "num_attention_heads": 2, "intermediate_size": 37,
                                   "max_position_embeddings": 64, "hidden_dropout_prob": 0.0,
                                   "attention_probs_dropout_prob": 0.0,
                                   "initializer_range": 0.2}})
    return prefix, config, discriminator, generator


def test_electra_discriminator_matches_transformers(electra):
    prefix, config, discriminator, _ = electra
    model = from_google(prefix, config)
    assert model.heads == ("rtd",) and model.encoder.config.embedding_size == 24
    assert_pretraining_outputs_match(model, discriminator, {"logits": "rtd_logits"})


def test_electra_generator_matches_transformers(electra):
    prefix, config, _, generator = electra
    model = from_google(prefix, config, electra_model="generator")
    assert model.heads == ("mlm",)
    assert (model.encoder.config.hidden_size, model.encoder.config.num_heads) == (16, 1)
    assert_pretraining_outputs_match(model, generator, {"logits": "mlm_logits"})


@pytest.mark.parametrize("values, family, discriminator, generator", [
    ({"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
      "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
      "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 12,
      "type_vocab_size": 2, "vocab_size": 30522}, "bert", "bert_base_uncased", None),
    ({"attention_probs_dropout_prob": 0, "hidden_act": "gelu", "hidden_dropout_prob": 0,
      "embedding_size": 128, "hidden_size": 768, "initializer_range": 0.02,
      "intermediate_size": 3072, "max_position_embeddings": 512, "num_attention_heads": 12,
      "num_hidden_layers": 12, "num_hidden_groups": 1, "net_structure_type": 0, "gap_size": 0,
      "num_memory_blocks": 0, "inner_group_num": 1, "down_scale_factor": 1,
      "type_vocab_size": 2, "vocab_size": 30000}, "albert", "albert_base_v2", None),
    ({"model_size": "small", "generator_hidden_size": 1.0}, "electra",
     "electra_small_discriminator", "electra_small_generator"),
    ({"model_size": "base", "embedding_size": 768, "generator_hidden_size": 0.33333}, "electra",
     "electra_base_discriminator", "electra_base_generator"),
    ({"model_size": "large", "embedding_size": 1024}, "electra",
     "electra_large_discriminator", "electra_large_generator"),
], ids=["bert_base", "albert_base_v2", "electra_small", "electra_base", "electra_large"])
def test_released_configs_give_the_public_architectures(values, family, discriminator, generator):
    """The released config files / ELECTRA's hyperparameters describe the published models."""
    config = encoder_config_from_google(values, family)
    assert config == kerasbert.zoo.get_config(discriminator)
    if generator:
        assert electra_generator_config(config, values, None) == kerasbert.zoo.get_config(generator)


def test_an_unknown_variable_is_named_and_encoder_only_leaves_heads_out(bert, tmp_path):
    squad = write_checkpoint(tmp_path / "squad.ckpt", {
        **bert.variables, "cls/squad/output_weights": np.zeros((2, 32), "float32")})
    with pytest.raises(WeightMismatchError, match=r"unexpected.*cls/squad/output_weights"):
        from_google(squad, bert.config)
    assert isinstance(from_google(squad, bert.config, encoder_only=True), Encoder)


def test_a_shape_that_does_not_fit_the_config_is_named(bert, tmp_path):
    config = write_json(tmp_path / "bert_config.json",
                        google_config(bert.reference.config, intermediate_size=40))
    with pytest.raises(WeightMismatchError,
                       match=r"wrong shapes.*bert/encoder/layer_0/intermediate/dense/kernel "
                             r"\(32, 37\)"):
        from_google(bert.prefix, config)


def test_missing_checkpoint_or_config_is_named(bert, tmp_path):
    missing = str(tmp_path / "no_model.ckpt")
    with pytest.raises(GoogleCheckpointError, match=f"{missing}: no TF1 checkpoint"):
        from_google(missing)
    lonely = write_checkpoint(tmp_path / "lonely.ckpt", bert.variables)
    with pytest.raises(GoogleCheckpointError, match="bert_config.json, albert_config.json"):
        from_google(lonely)
    with pytest.raises(GoogleCheckpointError, match=str(tmp_path / "nope.json")):
        from_google(lonely, tmp_path / "nope.json")
    unknown = write_checkpoint(tmp_path / "other.ckpt", {"t5/encoder/x": np.zeros(2, "float32")})
    with pytest.raises(GoogleCheckpointError, match="pass family="):
        from_google(unknown, bert.config)


def test_init_from_and_export_accept_a_checkpoint_prefix(bert):
    source = pretrained_source(bert.prefix)
    encoder = source.make_encoder()
    assert source.kind == "google" and source.tokenizer is None
    inputs = random_inputs(encoder.config, batch=2, seq=8)
    np.testing.assert_allclose(encoder(inputs)["sequence_output"],
                               hf_outputs(bert.reference.bert, inputs).last_hidden_state,
                               rtol=0, atol=TOLERANCE)
    model, tokenizer = load_export_model(bert.prefix)
    assert sorted(model.output) == ["mlm_logits", "nsp_logits"] and tokenizer is None
