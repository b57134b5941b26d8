"""`to_hf` writes folders that `transformers` loads with no missing or unexpected weights and that
compute what the model computed: every family x head `from_hf` supports, round trip from
`transformers` and from models built in kerasbert; tokenizer files that `AutoTokenizer` reads to
the same ids; and the models and folders it refuses."""

import json
import os

import keras
import numpy as np
import pytest
import transformers

import kerasbert
from kerasbert.convert import UnsupportedModelError, to_hf
from kerasbert.convert.from_hf import (ENCODER_ARCHITECTURES, PRETRAINING_ARCHITECTURES,
                                       TASK_ARCHITECTURES)
from kerasbert.data import demo
from kerasbert.tokenizers import from_hf as tokenizer_from_hf
from kerasbert.tokenizers.text_files import iterate_lines
from tests.helpers import (TINY_CONFIGS, hf_config, random_inputs, run_hf_model, save_hf_model,
                           save_modernbert_tokenizer)
from tests.tokenizer_cases import ADVERSARIAL_TEXTS

TOLERANCE = 1e-5
STEMS = {"bert": "Bert", "roberta": "Roberta", "albert": "Albert", "electra": "Electra",
         "distilbert": "DistilBert", "modernbert": "ModernBert"}
LABELS = dict(id2label={0: "neg", 1: "neutral", 2: "pos"},
              label2id={"neg": 0, "neutral": 1, "pos": 2})


def _family(architecture):
    return next(family for family, stem in STEMS.items() if architecture.startswith(stem))


def _overrides(architecture):
    """Label names for classifiers, and the odd configurations: ALBERT layer groups, ELECTRA's
    generator (smaller embeddings, ReLU), DistilBERT's sinusoidal positions, head dropouts of
    their own."""
    return {
        "AlbertForPreTraining": dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2),
        "ElectraForMaskedLM": dict(embedding_size=16, hidden_act="relu"),
        "BertForTokenClassification": dict(LABELS, classifier_dropout=0.3),
        "DistilBertForSequenceClassification": dict(LABELS, seq_classif_dropout=0.3),
        "DistilBertForQuestionAnswering": dict(qa_dropout=0.2),
        "DistilBertForMultipleChoice": dict(sinusoidal_pos_embds=True),
        "ModernBertForSequenceClassification": dict(LABELS, classifier_pooling="mean"),
        "ModernBertForMultipleChoice": dict(classifier_pooling="mean", classifier_dropout=0.2),
    }.get(architecture, LABELS if "Classification" in architecture else {})


# Every transformers class from_hf imports (encoders, pretraining and task heads), and regression.
ROUND_TRIPS = [(_family(architecture), architecture, _overrides(architecture)) for architecture
               in [*ENCODER_ARCHITECTURES.values(), *PRETRAINING_ARCHITECTURES,
                   *TASK_ARCHITECTURES]]
ROUND_TRIPS.append(("roberta", "RobertaForSequenceClassification", dict(num_labels=1)))
assert len(ROUND_TRIPS) == 6 + 9 + 24 + 1


def _outputs(model, inputs):
    return {name: value.numpy() for name, value in run_hf_model(model, inputs).items()
            if name in ("last_hidden_state", "pooler_output", "logits", "prediction_logits",
                        "seq_relationship_logits", "sop_logits", "start_logits", "end_logits")}


def _inputs_for(architecture, config):
    inputs = random_inputs(config, batch=2, seq=9, seed=1)
    if architecture.endswith("ForMultipleChoice"):
        rows = random_inputs(config, batch=6, seq=9, seed=2)
        inputs = {name: value.reshape(2, 3, 9) for name, value in rows.items()}
    return inputs


def load_hf(directory, architecture, **kwargs):
    """The `transformers` model in `directory`, asserting nothing was missing or unexpected."""
    model, info = getattr(transformers, architecture).from_pretrained(
        directory, output_loading_info=True, **kwargs)
    assert {key: value for key, value in info.items() if value} == {}, info
    return model.eval()


@pytest.mark.parametrize("case", ROUND_TRIPS, ids=[
    case[1] + "".join(f"-{key}" for key in case[2] if key not in LABELS) for case in ROUND_TRIPS])
def test_transformers_round_trip(case, tmp_path):
    family, architecture, overrides = case
    reference = save_hf_model(architecture, hf_config(family, **overrides), tmp_path / "original")
    imported = kerasbert.convert.from_hf(tmp_path / "original")
    to_hf(imported, tmp_path / "exported")

    written = json.loads((tmp_path / "exported" / "config.json").read_text())
    assert written["architectures"] == [architecture] and written["model_type"] == family
    exported = load_hf(tmp_path / "exported", architecture)
    original_state, exported_state = reference.state_dict(), exported.state_dict()
    assert sorted(exported_state) == sorted(original_state)
    for name, value in original_state.items():
        assert np.array_equal(exported_state[name].numpy(), value.numpy()), name
    for field in ("id2label", "label2id", "num_labels", "hidden_act",
                  "embedding_size", "num_hidden_groups", "inner_group_num", "layer_norm_eps",
                  "pad_token_id", "max_position_embeddings", "type_vocab_size",
                  # DistilBERT's own names
                  "dim", "n_layers", "n_heads", "hidden_dim", "activation", "sinusoidal_pos_embds",
                  "seq_classif_dropout", "qa_dropout", "dropout",
                  # ModernBERT's own names
                  "hidden_activation", "norm_eps", "local_attention", "layer_types",
                  "rope_parameters", "classifier_pooling", "classifier_activation"):
        assert getattr(exported.config, field, None) == getattr(reference.config, field,
                                                                None), field
    for field in ("classifier_dropout", "classifier_dropout_prob", "summary_last_dropout"):
        assert _dropout(exported.config, field) == _dropout(reference.config, field), field
    # transformers leaves `problem_type` unset and infers regression from one label; ours says so.
    assert exported.config.problem_type == ("regression" if overrides.get("num_labels") == 1
                                            else None)

    inputs = _inputs_for(architecture, imported.encoder.config if hasattr(imported, "encoder")
                         else imported.config)
    expected, actual = _outputs(reference, inputs), _outputs(exported, inputs)
    assert sorted(actual) == sorted(expected) and expected
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=0, atol=TOLERANCE, err_msg=name)


def _dropout(config, field):
    """A head's dropout as transformers applies it (unset: the hidden dropout; DistilBERT's
    heads have keys of their own, compared above)."""
    value = getattr(config, field, None)
    return getattr(config, "hidden_dropout_prob", None) if value is None else value


def _randomized(model, seed):
    """Give every weight of `model` random values (biases and LayerNorms too), as training would."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(scale=0.2, size=variable.shape).astype("float32")
                        + (1.0 if variable.path.endswith("gamma") else 0.0))
    return model


def _kerasbert_outputs(model, inputs):
    return {name: np.asarray(value) for name, value in model(inputs).items()}


@pytest.mark.parametrize("family", STEMS)
def test_native_classifier_with_label_names(family, tmp_path):
    model = _randomized(kerasbert.models.build_task_model(
        TINY_CONFIGS[family], "sequence_classification", num_labels=3,
        id2label=["negative", "neutral", "positive"], dropout=0.2), seed=3)
    to_hf(model, tmp_path)
    exported = load_hf(tmp_path, f"{STEMS[family]}ForSequenceClassification")
    assert exported.config.id2label == {0: "negative", 1: "neutral", 2: "positive"}
    assert exported.config.label2id == {"negative": 0, "neutral": 1, "positive": 2}
    dropout_field = {"albert": "classifier_dropout_prob",
                     "distilbert": "seq_classif_dropout"}.get(family, "classifier_dropout")
    assert getattr(exported.config, dropout_field) == 0.2
    inputs = random_inputs(model.encoder.config, seed=5)
    np.testing.assert_allclose(_outputs(exported, inputs)["logits"],
                               _kerasbert_outputs(model, inputs)["logits"], rtol=0, atol=TOLERANCE)
    assert kerasbert.convert.from_hf(tmp_path).id2label == model.id2label


def test_native_regression_and_token_tagger(tmp_path):
    regression = _randomized(kerasbert.models.build_task_model(
        TINY_CONFIGS["electra"], "sequence_classification", num_labels=1), seed=4)
    to_hf(regression, tmp_path / "regression")
    exported = load_hf(tmp_path / "regression", "ElectraForSequenceClassification")
    assert exported.config.problem_type == "regression" and exported.config.num_labels == 1
    inputs = random_inputs(regression.encoder.config)
    np.testing.assert_allclose(_outputs(exported, inputs)["logits"],
                               _kerasbert_outputs(regression, inputs)["logits"], rtol=0,
                               atol=TOLERANCE)

    tagger = _randomized(kerasbert.models.build_task_model(
        TINY_CONFIGS["albert"], "token_classification", num_labels=4,
        id2label=["O", "B-X", "I-X", "E-X"]), seed=5)
    to_hf(tagger, tmp_path / "tagger")
    exported = load_hf(tmp_path / "tagger", "AlbertForTokenClassification")
    real = inputs["padding_mask"] == 1
    np.testing.assert_allclose(_outputs(exported, inputs)["logits"][real],
                               _kerasbert_outputs(tagger, inputs)["logits"][real], rtol=0,
                               atol=TOLERANCE)


def test_native_pretraining_model_leaves_out_its_unread_pooler(tmp_path):
    """`build_pretraining_model` gives RoBERTa a pooler that its MLM head never reads;
    `RobertaForMaskedLM` has none, so it is not written."""
    model = _randomized(kerasbert.models.build_pretraining_model(TINY_CONFIGS["roberta"]),
                               seed=6)
    assert model.encoder.config.use_pooler and model.heads == ("mlm",)
    to_hf(model, tmp_path)
    exported = load_hf(tmp_path, "RobertaForMaskedLM")
    inputs = random_inputs(model.encoder.config)
    inputs["masked_lm_positions"] = np.array([[1, 4, 2], [0, 3, 3], [2, 1, 0]], "int32")
    expected = np.take_along_axis(_outputs(exported, inputs)["logits"],
                                  inputs["masked_lm_positions"][..., None], axis=1)
    np.testing.assert_allclose(_kerasbert_outputs(model, inputs)["mlm_logits"], expected, rtol=0,
                               atol=TOLERANCE)


def test_encoder_without_pooler_loads_without_a_pooling_layer(tmp_path):
    """A pooler-less BERT encoder is written without one; `add_pooling_layer=False` loads it
    whole, and plain loading reports exactly the pooler as missing (transformers adds a random
    one)."""
    encoder = _randomized(kerasbert.models.build_encoder(
        TINY_CONFIGS["bert"].replace(use_pooler=False)), seed=7)
    to_hf(encoder, tmp_path)
    exported = load_hf(tmp_path, "BertModel", add_pooling_layer=False)
    inputs = random_inputs(encoder.config)
    np.testing.assert_allclose(_outputs(exported, inputs)["last_hidden_state"],
                               _kerasbert_outputs(encoder, inputs)["sequence_output"], rtol=0,
                               atol=TOLERANCE)
    _, info = transformers.BertModel.from_pretrained(tmp_path, output_loading_info=True)
    assert sorted(info["missing_keys"]) == ["pooler.dense.bias", "pooler.dense.weight"]


# --- tokenizer files ---

TEXTS = (list(iterate_lines(demo.pretraining_corpus_files()[:1]))[:150] + ADVERSARIAL_TEXTS
         + ["1,000, 2,000", "x  <mask> y"])
# Special tokens spelled in the text. A cased SentencePiece model is left out: transformers'
# Unigram model matches its control pieces ("[MASK]") in text, SentencePiece, which kerasbert
# follows, never does (see `SentencePieceTokenizer`).
SPECIAL_TEXTS = ["a [MASK] b [SEP]", "x  <mask> y </s>", "[CLS] <s>"]


TOKENIZERS = {
    "wordpiece": lambda folder: tokenizer_from_hf(demo.vocabulary_dir("wordpiece")),
    "byte_pair": lambda folder: tokenizer_from_hf(demo.vocabulary_dir("byte_pair")),
    "byte_pair_lstrip_mask": lambda folder: kerasbert.tokenizers.BytePairTokenizer.from_files(
        os.path.join(demo.vocabulary_dir("byte_pair"), "vocab.json"),
        os.path.join(demo.vocabulary_dir("byte_pair"), "merges.txt"), add_prefix_space=True,
        lstrip_tokens=["<mask>"]),
    "sentence_piece": lambda folder: tokenizer_from_hf(demo.vocabulary_dir("sentence_piece")),
    # [CLS] A [SEP] B [SEP], special tokens added after the BPE vocabulary, [MASK] with lstrip.
    "modernbert": lambda folder: tokenizer_from_hf(_modernbert_tokenizer_folder(folder)),
    "sentence_piece_cased": lambda folder: kerasbert.tokenizers.load_sentence_piece_tokenizer(
        demo.vocabulary_dir("sentence_piece"), lowercase=False, keep_accents=True),
}
FAMILY_OF_TOKENIZER = {"wordpiece": "bert", "byte_pair": "roberta", "sentence_piece": "albert",
                       "modernbert": "modernbert"}


def _modernbert_tokenizer_folder(folder):
    save_modernbert_tokenizer(folder)
    return folder


@pytest.mark.parametrize("name", TOKENIZERS)
def test_tokenizer_files_give_the_same_ids(name, tmp_path):
    tokenizer = TOKENIZERS[name](tmp_path / "source")
    family = FAMILY_OF_TOKENIZER[name.split("_lstrip")[0].removesuffix("_cased")]
    config = TINY_CONFIGS[family].replace(vocab_size=tokenizer.vocabulary_size(),
                                          pad_token_id=tokenizer.pad_token_id)
    to_hf(kerasbert.models.build_encoder(config), tmp_path / "written", tokenizer=tokenizer)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path / "written")
    texts = TEXTS + (SPECIAL_TEXTS if name != "sentence_piece_cased" else [])
    ids = tokenizer.tokenize(texts).to_list()
    assert ids == theirs(texts, add_special_tokens=False)["input_ids"]
    first, second = texts[:80], texts[-80:]
    packed = tokenizer(first, second, max_length=40)
    expected = theirs(first, second, max_length=40, truncation="longest_first",
                      padding="max_length", return_token_type_ids=True)
    assert packed["token_ids"].numpy().tolist() == expected["input_ids"]
    assert packed["segment_ids"].numpy().tolist() == expected["token_type_ids"]
    assert packed["padding_mask"].numpy().tolist() == expected["attention_mask"]
    assert theirs.model_max_length == config.max_sequence_length
    # kerasbert reads its own files back to the same tokenizer.
    assert tokenizer_from_hf(tmp_path / "written").tokenize(texts).to_list() == ids


# --- refusals ---

def test_refuses_a_non_empty_directory_and_leaves_it_alone(tmp_path):
    encoder = kerasbert.models.build_encoder(TINY_CONFIGS["bert"])
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        to_hf(encoder, tmp_path)
    assert os.listdir(tmp_path) == ["keep.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not a directory"):
        to_hf(encoder, tmp_path / "file")
    (tmp_path / "empty").mkdir()
    to_hf(encoder, tmp_path / "empty")  # an empty directory is filled
    assert sorted(os.listdir(tmp_path / "empty")) == ["config.json", "model.safetensors"]


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    import safetensors.numpy

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(safetensors.numpy, "save_file", fail)
    with pytest.raises(OSError, match="disk full"):
        to_hf(kerasbert.models.build_encoder(TINY_CONFIGS["bert"]), tmp_path / "out")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("build,message", [
    (lambda: kerasbert.models.build_pretraining_model(TINY_CONFIGS["roberta"],
                                                      heads=("mlm", "nsp")),
     r"heads \('mlm', 'nsp'\).*RobertaForMaskedLM"),
    (lambda: kerasbert.models.build_pretraining_model(TINY_CONFIGS["electra"],
                                                      heads=("mlm", "rtd")),
     r"ElectraForPreTraining \('rtd',\)"),
    (lambda: kerasbert.models.build_pretraining_model(TINY_CONFIGS["bert"], mlm_activation="relu"),
     "activation is 'relu'"),
    (lambda: kerasbert.models.build_encoder(TINY_CONFIGS["electra"].replace(use_pooler=True)),
     "ELECTRA has no pooler"),
    (lambda: kerasbert.models.build_encoder(TINY_CONFIGS["bert"].replace(embedding_size=16)),
     "embedding_size"),
    (lambda: kerasbert.models.build_encoder(TINY_CONFIGS["bert"].replace(position_offset=2)),
     "position_offset"),
    (lambda: kerasbert.models.ElectraPretrainer(
        TINY_CONFIGS["electra"], kerasbert.models.generator_config(TINY_CONFIGS["electra"])),
     "generator and a discriminator"),
    (lambda: kerasbert.models.build_encoder(
        TINY_CONFIGS["distilbert"].replace(layer_norm_epsilon=1e-6)), "1e-12"),
    (lambda: keras.Sequential([keras.layers.Dense(2)]), "got Sequential"),
], ids=["roberta-nsp", "electra-mlm-rtd", "mlm-activation", "electra-pooler",
        "bert-projection", "bert-offset", "electra-pretrainer", "distilbert-epsilon",
        "not-kerasbert"])
def test_refuses_what_transformers_cannot_express(build, message, tmp_path):
    with pytest.raises(UnsupportedModelError, match=message):
        to_hf(build(), tmp_path / "out")
    assert not (tmp_path / "out").exists() and os.listdir(tmp_path) == []


def test_refuses_a_tokenizer_that_does_not_fit_the_model(tmp_path):
    tokenizer = tokenizer_from_hf(demo.vocabulary_dir("byte_pair"))
    too_small = kerasbert.models.build_encoder(TINY_CONFIGS["roberta"])
    with pytest.raises(UnsupportedModelError, match=rf"{tokenizer.vocabulary_size()} tokens"):
        to_hf(too_small, tmp_path / "out", tokenizer=tokenizer)
    other_pad = kerasbert.models.build_encoder(TINY_CONFIGS["bert"].replace(
        vocab_size=tokenizer.vocabulary_size()))
    with pytest.raises(UnsupportedModelError, match=r"pads with id 1 \('<pad>'\)"):
        to_hf(other_pad, tmp_path / "out", tokenizer=tokenizer)
    wordpiece = kerasbert.tokenizers.WordPieceTokenizer(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], max_chars_per_word=20)
    with pytest.raises(UnsupportedModelError, match="max_chars_per_word is 20"):
        to_hf(kerasbert.models.build_encoder(TINY_CONFIGS["bert"]), tmp_path / "out",
              tokenizer=wordpiece)
    assert os.listdir(tmp_path) == []
