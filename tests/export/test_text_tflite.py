"""`model_text.tflite`: text in, the model's outputs out, tokenized as Hugging Face's BertTokenizerFast.

Most tests convert a model whose outputs are its own inputs (as float32), so the flatbuffer
hands back the packed `token_ids` / `segment_ids` / `padding_mask` and they can be compared
id for id with `transformers.BertTokenizerFast`; the others run a real encoder and task model.
The flatbuffer pads a batch to the bucket of its longest text (`padding_buckets`): the
reference is Hugging Face padding to the full length, cut to that bucket.
"""

import gzip
import itertools

import keras
import numpy as np
import pytest
import transformers

import kerasbert
from kerasbert.data import demo
from kerasbert.export.answers import answer_names
from kerasbert.export.padding_buckets import expected_width
from kerasbert.export.text_tflite import (TEXT_TFLITE_DIFFERENCES, TFTEXT_CUSTOM_OPS,
                                          run_text_tflite, text_tflite_model)
from kerasbert.export.tflite import non_builtin_ops, op_inventory
from kerasbert.tokenizers import WordPieceTokenizer, from_hf
from tests.tokenizer_cases import ADVERSARIAL_TEXTS

IDS_LENGTH = 40
MODEL_LENGTH = 40
INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")
HF_NAMES = {"token_ids": "input_ids", "segment_ids": "token_type_ids",
            "padding_mask": "attention_mask"}

LATIN_TEXTS = [
    "Héllo Wörld! Crème brûlée, naïve café, résumé.",
    "Ångström ÀÉÎÕÜ façade Über São Paulo Zürich Müller",
    "The Python Software Foundation's documentation, version 3.11.",
    "¿Qué pasó? «Très bien», dit-il — c'est déjà fini...",
]
# One case per entry of TEXT_TFLITE_DIFFERENCES (found by the key): (lowercase, text, a text
# to which Hugging Face gives the ids the flatbuffer gives `text`).
DIFFERENCE_CASES = {
    "Special-token strings": [
        (True, "a [SEP] b [MASK]", "a [ sep ] b [ mask ]"),
        (False, "a [SEP] b [MASK]", "a [ SEP ] b [ MASK ]"),
    ],
    "Words longer than max_chars_per_word": [
        (False, "é" * 60, "[UNK]"),
    ],
    "Unicode versions": [
        (True, "a\u0890b fox", "ab fox"),
        (False, "a\u1b4eb fox", "a \u1b4e b fox"),
    ],
}
# What tensorflow-text's own normalization table did differently, and the table built from
# Hugging Face's rules (kerasbert.tokenizers.bert_normalizer_model) does as Hugging Face does:
# (lowercase, text).
FORMERLY_DIFFERENT = [
    (True, "ctrl\x00chars\x07here and\x7fdel"),        # control characters: deleted
    (False, "ctrl\x00chars\x07here and\x7fdel"),
    (True, "line\x85nel\x0bvt\x0cff"),
    (False, "zero\u200bwidth\u200djoiner\u00adsoft\ufeffbom"),  # format characters: deleted
    (True, "abc\ufffddef"),                            # U+FFFD and private use: deleted
    (False, "abc\ue000def"),
    (True, "ＡＢＣ ﬁ … Straße ①"),                       # no NFKD or case folding
    (False, "ＡＢＣ ﬁ … Straße ①"),
]


# --- fixtures ---

def _read_vocabulary(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


@pytest.fixture(scope="module")
def vocab_files(tmp_path_factory):
    """{lowercase: vocab.txt}: the shipped (uncased) vocabulary, and a cased one made from it
    with capitalized words and accented letters added."""
    uncased = f"{demo.vocabulary_dir('wordpiece')}/vocab.txt"
    vocabulary = _read_vocabulary(uncased)
    known = set(vocabulary)
    extra = [word.capitalize() for word in vocabulary if word.isalpha() and word.islower()
             and len(word) > 1]
    extra += [chr(code) for code in range(ord("A"), ord("Z") + 1)]
    extra += list("éèàöüçñåÉÀÖÜÅß") + ["##" + letter for letter in "éèàöüçñåß"]
    cased = tmp_path_factory.mktemp("cased_wordpiece") / "vocab.txt"
    cased.write_text("\n".join(vocabulary + [w for w in dict.fromkeys(extra) if w not in known])
                     + "\n", encoding="utf-8")
    return {True: uncased, False: str(cased)}


@pytest.fixture(scope="module")
def tokenizers(vocab_files):
    """{lowercase: (ours, transformers.BertTokenizerFast)}."""
    return {lowercase: (WordPieceTokenizer(_read_vocabulary(path), lowercase=lowercase),
                        transformers.BertTokenizerFast(vocab=path, do_lower_case=lowercase))
            for lowercase, path in vocab_files.items()}


def _packed_ids_model():
    inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in INPUT_NAMES}
    return keras.Model(inputs, {name: keras.ops.cast(inputs[name], "float32")
                                for name in INPUT_NAMES}, name="packed_ids")


@pytest.fixture(scope="module")
def ids_flatbuffers(tokenizers):
    """{lowercase: flatbuffer whose outputs are the packed ids}."""
    model = _packed_ids_model()
    return {lowercase: text_tflite_model(model, ours, max_seq_length=IDS_LENGTH)
            for lowercase, (ours, _) in tokenizers.items()}


def _config(tokenizer):
    return kerasbert.EncoderConfig(family="bert", vocab_size=tokenizer.vocabulary_size(),
                                   hidden_size=32, num_layers=2, num_heads=2,
                                   intermediate_size=64, max_positions=64)


@pytest.fixture(scope="module")
def encoder_uncased(tokenizers):
    keras.utils.set_random_seed(0)
    encoder = kerasbert.models.build_encoder(_config(tokenizers[True][0]))
    return encoder, text_tflite_model(encoder, tokenizers[True][0], max_seq_length=MODEL_LENGTH)


@pytest.fixture(scope="module")
def classifier_cased(tokenizers):
    keras.utils.set_random_seed(1)
    encoder = kerasbert.models.build_encoder(_config(tokenizers[False][0]))
    model = kerasbert.models.build_task_model(encoder, "sequence_classification", num_labels=3)
    # Logits of order 1 rather than 0.01, so a wrong id or mask shows in them.
    kernel = model.get_layer("classifier").kernel
    kernel.assign(100.0 * kernel)
    return model, text_tflite_model(model, tokenizers[False][0], max_seq_length=MODEL_LENGTH)


@pytest.fixture(scope="module")
def corpus_texts():
    """200 lines of the pretraining corpus and 100 WordNet glosses."""
    with gzip.open(demo.pretraining_corpus_files()[0], "rt", encoding="utf-8") as f:
        corpus = [line.rstrip("\n") for line in itertools.islice(f, 200)]
    with gzip.open(demo.classification_files()["dev"], "rt", encoding="utf-8") as f:
        glosses = [line.rstrip("\n").split("\t", 1)[1] for line in itertools.islice(f, 1, 101)]
    return corpus + glosses


def _hf_packed(reference, texts, length, to_bucket=True):
    """Hugging Face's ids padded to `length`, cut to the batch's bucket unless `to_bucket` is
    False."""
    encoded = reference(list(texts), max_length=length, truncation="longest_first",
                        padding="max_length", return_tensors="np")
    width = expected_width(encoded["attention_mask"], length) if to_bucket else length
    return {name: encoded[hf_name][:, :width].astype("int32")
            for name, hf_name in HF_NAMES.items()}


def _keras_outputs_cut_to_bucket(model, inputs):
    """`model`'s outputs on `inputs` (padded to `MODEL_LENGTH`), sequence outputs cut to the
    bucket of the batch."""
    width = expected_width(inputs["padding_mask"], MODEL_LENGTH)
    outputs = {name: np.asarray(value) for name, value in model(inputs, training=False).items()}
    return {name: value[:, :width] if name == "sequence_output" else value
            for name, value in outputs.items()}


def _flatbuffer_ids(flatbuffer, texts):
    outputs = run_text_tflite(flatbuffer, list(texts))
    return {name: outputs[name].astype("int32") for name in INPUT_NAMES}


def _mismatched_texts(flatbuffer, reference, texts):
    ours = _flatbuffer_ids(flatbuffer, texts)
    theirs = _hf_packed(reference, texts, IDS_LENGTH)
    return {text for row, text in enumerate(texts)
            if any(not np.array_equal(ours[name][row], theirs[name][row]) for name in INPUT_NAMES)}


def _assert_close(actual, expected):
    scale = max(1.0, float(np.max(np.abs(expected))))
    assert actual.shape == expected.shape
    assert float(np.max(np.abs(actual - expected))) <= 1e-4 * scale


# --- the flatbuffer ---

@pytest.mark.slow
def test_only_builtin_ops_and_the_tensorflow_text_kernels(ids_flatbuffers, encoder_uncased):
    serve_text_ops = ["FastBertNormalize", "FastWordpieceTokenizeWithOffsets"]
    assert set(serve_text_ops) < set(TFTEXT_CUSTOM_OPS)  # the others: answer signatures'
    for flatbuffer in (*ids_flatbuffers.values(), encoder_uncased[1]):
        assert non_builtin_ops(flatbuffer) == serve_text_ops
        inventory = op_inventory(flatbuffer)
        assert not [op for op in inventory if op.startswith("Flex")]
        assert {op for op in inventory if not op.isupper()} == set(serve_text_ops)


@pytest.mark.slow
def test_signature_is_serve_text_with_the_model_output_names(encoder_uncased, classifier_cased):
    from ai_edge_litert.interpreter import Interpreter
    for model, flatbuffer in (encoder_uncased, classifier_cased):
        # The signature list is readable without the custom kernels.
        signatures = Interpreter(model_content=flatbuffer).get_signature_list()
        outputs = sorted([*model.output, *answer_names(model)])
        assert signatures == {"serve_text": {"inputs": ["text"], "outputs": outputs}}


# --- the same ids as Hugging Face ---

@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_same_ids_as_hugging_face_on_latin_text_and_the_corpus(lowercase, tokenizers,
                                                              ids_flatbuffers, corpus_texts):
    _, reference = tokenizers[lowercase]
    texts = LATIN_TEXTS + corpus_texts
    ours = _flatbuffer_ids(ids_flatbuffers[lowercase], texts)
    theirs = _hf_packed(reference, texts, IDS_LENGTH)
    for name in INPUT_NAMES:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    # The texts are not mostly [UNK]: accents and capitals are in the vocabularies.
    latin = ours["token_ids"][:len(LATIN_TEXTS)]
    unknown = np.sum(latin == reference.unk_token_id)
    assert unknown < 0.1 * np.sum(ours["padding_mask"][:len(LATIN_TEXTS)])


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_adversarial_texts_give_hugging_faces_ids(lowercase, tokenizers, ids_flatbuffers):
    """Control and zero-width characters, U+FFFD, compatibility characters, emoji, CJK...: the
    special-token and long-word differences need texts of their own (DIFFERENCE_CASES)."""
    _, reference = tokenizers[lowercase]
    assert _mismatched_texts(ids_flatbuffers[lowercase], reference, ADVERSARIAL_TEXTS) == set()


def test_long_text_is_truncated_like_hugging_face(tokenizers, ids_flatbuffers):
    _, reference = tokenizers[False]
    text = "Ein sehr langer Satz über Müller und Zürich, " * 20
    ours = _flatbuffer_ids(ids_flatbuffers[False], [text])
    assert len(reference(text)["input_ids"]) > IDS_LENGTH
    theirs = _hf_packed(reference, [text], IDS_LENGTH)
    for name in INPUT_NAMES:
        np.testing.assert_array_equal(ours[name], theirs[name])
    assert ours["token_ids"][0, -1] == reference.sep_token_id
    assert ours["padding_mask"].sum() == IDS_LENGTH


def test_empty_texts_and_batches_with_no_tokens(tokenizers, ids_flatbuffers):
    ours = _flatbuffer_ids(ids_flatbuffers[True], ["", "  \t"])
    np.testing.assert_array_equal(ours["token_ids"][:, :3], [[2, 3, 0], [2, 3, 0]])
    np.testing.assert_array_equal(ours["padding_mask"].sum(axis=1), [2, 2])


# --- the model's outputs ---

@pytest.mark.parametrize("texts", [LATIN_TEXTS[:1], LATIN_TEXTS[1:] + ["x " * 40]],
                         ids=["batch1", "batch3+long"])
def test_encoder_outputs_equal_keras_on_hugging_face_ids(texts, tokenizers, encoder_uncased):
    encoder, flatbuffer = encoder_uncased
    inputs = _hf_packed(tokenizers[True][1], texts, MODEL_LENGTH, to_bucket=False)
    expected = _keras_outputs_cut_to_bucket(encoder, inputs)
    outputs = run_text_tflite(flatbuffer, texts)
    assert sorted(outputs) == sorted(expected) == ["pooled_output", "sequence_output"]
    for name in expected:
        _assert_close(outputs[name], expected[name])


@pytest.mark.parametrize("texts", [LATIN_TEXTS[1:2], LATIN_TEXTS[:3]], ids=["batch1", "batch3"])
def test_classifier_logits_equal_keras_on_hugging_face_ids(texts, tokenizers, classifier_cased):
    model, flatbuffer = classifier_cased
    inputs = _hf_packed(tokenizers[False][1], texts, MODEL_LENGTH, to_bucket=False)
    expected = np.asarray(model(inputs, training=False)["logits"])
    outputs = run_text_tflite(flatbuffer, texts)
    assert sorted(outputs) == ["label", "label_id", "logits", "probabilities"]
    assert outputs["logits"].shape == (len(texts), 3)
    _assert_close(outputs["logits"], expected)
    # The answers, from the Keras logits with NumPy (the model has no id2label: LABEL_<id>).
    np.testing.assert_array_equal(outputs["label_id"], np.argmax(expected, axis=-1))
    assert [label.decode() for label in outputs["label"]] == \
        [f"LABEL_{index}" for index in np.argmax(expected, axis=-1)]
    shifted = np.exp(expected - expected.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(outputs["probabilities"], shifted / shifted.sum(-1, keepdims=True),
                               atol=1e-5)


# Packed, 3, 6, 23, 34 and 212 (truncated to 40) tokens: buckets 16, 16, 32, 40 and 40.
MIXED_LENGTHS = ["x", "Héllo wörld", LATIN_TEXTS[0], "Héllo wörld " * 8,
                 "Crème brûlée " * 30]


def test_texts_of_several_lengths_in_one_batch_and_alone_give_fixed_padding_outputs(
        tokenizers, encoder_uncased):
    """Each batch runs at its own bucket, and the padding is masked: the same outputs as
    the Keras model with every text padded to `MODEL_LENGTH`."""
    encoder, flatbuffer = encoder_uncased
    reference = tokenizers[True][1]
    widths = []
    for texts in [MIXED_LENGTHS, *([text] for text in MIXED_LENGTHS)]:
        inputs = _hf_packed(reference, texts, MODEL_LENGTH, to_bucket=False)
        expected = _keras_outputs_cut_to_bucket(encoder, inputs)
        outputs = run_text_tflite(flatbuffer, texts)
        for name in expected:
            _assert_close(outputs[name], expected[name])
        widths.append(outputs["sequence_output"].shape[1])
    assert widths == [MODEL_LENGTH, 16, 16, 32, MODEL_LENGTH, MODEL_LENGTH]


def test_length_buckets_off_pads_to_max_seq_length(tokenizers):
    flatbuffer = text_tflite_model(_packed_ids_model(), tokenizers[True][0],
                                   max_seq_length=IDS_LENGTH, length_buckets=False)
    texts = ["x", "Héllo wörld"]
    ours = _flatbuffer_ids(flatbuffer, texts)
    theirs = _hf_packed(tokenizers[True][1], texts, IDS_LENGTH, to_bucket=False)
    for name in INPUT_NAMES:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    assert ours["token_ids"].shape == (2, IDS_LENGTH)


def test_runs_from_a_path_and_on_one_string(tmp_path, ids_flatbuffers):
    path = tmp_path / "model_text.tflite"
    path.write_bytes(ids_flatbuffers[True])
    from_path = run_text_tflite(path, "Héllo wörld")
    from_bytes = run_text_tflite(ids_flatbuffers[True], ["Héllo wörld"])
    assert from_path["token_ids"].shape == (1, 16)
    np.testing.assert_array_equal(from_path["token_ids"], from_bytes["token_ids"])


@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated:UserWarning")
def test_tensorflow_interpreter_gives_the_same_outputs(classifier_cased):
    """run_text_tflite uses ai_edge_litert's interpreter; TensorFlow's agrees."""
    import tensorflow_text
    from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

    _, flatbuffer = classifier_cased
    interpreter = InterpreterWithCustomOps(
        custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS,
        model_content=flatbuffer)
    texts = np.array([text.encode("utf-8") for text in LATIN_TEXTS], dtype=object)
    theirs = interpreter.get_signature_runner("serve_text")(text=texts)["logits"]
    np.testing.assert_allclose(run_text_tflite(flatbuffer, LATIN_TEXTS)["logits"], theirs,
                               atol=1e-6)


# --- the documented differences ---

def test_every_documented_difference_has_a_case():
    for key in DIFFERENCE_CASES:
        assert sum(key in entry for entry in TEXT_TFLITE_DIFFERENCES) == 1, key
    assert len(DIFFERENCE_CASES) == len(TEXT_TFLITE_DIFFERENCES)


@pytest.mark.parametrize("key", sorted(DIFFERENCE_CASES))
def test_documented_difference_still_exists(key, tokenizers, ids_flatbuffers):
    for lowercase, text, hf_equivalent in DIFFERENCE_CASES[key]:
        _, reference = tokenizers[lowercase]
        ours = _flatbuffer_ids(ids_flatbuffers[lowercase], [text])["token_ids"]
        theirs = _hf_packed(reference, [text], IDS_LENGTH)["token_ids"]
        assert not np.array_equal(ours, theirs), (key, lowercase, text)
        np.testing.assert_array_equal(
            ours, _hf_packed(reference, [hf_equivalent], IDS_LENGTH)["token_ids"],
            err_msg=f"{key}: {text!r}")


def test_what_tensorflow_texts_own_table_changed_is_as_hugging_face(tokenizers, ids_flatbuffers):
    for lowercase, text in FORMERLY_DIFFERENT:
        _, reference = tokenizers[lowercase]
        np.testing.assert_array_equal(
            _flatbuffer_ids(ids_flatbuffers[lowercase], [text])["token_ids"],
            _hf_packed(reference, [text], IDS_LENGTH)["token_ids"], err_msg=repr(text))


@pytest.mark.parametrize("lowercase", [True, False], ids=["lowercase", "cased"])
def test_accents_and_case_apart(lowercase, vocab_files):
    """Lower-casing without stripping accents, and stripping accents of cased text: both
    expressible with a table of their own, and Hugging Face's ids."""
    path = vocab_files[lowercase]
    ours = WordPieceTokenizer(_read_vocabulary(path), lowercase=lowercase,
                              strip_accents=not lowercase)
    reference = transformers.BertTokenizerFast(vocab=path, do_lower_case=lowercase,
                                               strip_accents=not lowercase)
    flatbuffer = text_tflite_model(_packed_ids_model(), ours, max_seq_length=IDS_LENGTH)
    texts = LATIN_TEXTS + ["ÉCOLE Crème BRÛLÉE naïve", "Ångström Åsa ÖL"]
    assert _mismatched_texts(flatbuffer, reference, texts) == set()
    # The option matters for these texts: the other setting gives other ids.
    other = transformers.BertTokenizerFast(vocab=path, do_lower_case=lowercase,
                                           strip_accents=lowercase)
    assert _mismatched_texts(flatbuffer, other, texts)


# --- what is not supported ---

def test_unsupported_tokenizers_raise(tokenizers):
    model = _packed_ids_model()
    byte_pair = from_hf(demo.vocabulary_dir("byte_pair"))
    with pytest.raises(ValueError, match="BytePairTokenizer"):
        text_tflite_model(model, byte_pair)
    vocabulary = tokenizers[True][0].vocabulary
    with pytest.raises(ValueError, match="split_cjk=False"):
        text_tflite_model(model, WordPieceTokenizer(vocabulary, split_cjk=False))


def test_unsupported_models_raise(tokenizers):
    tokenizer = tokenizers[True][0]
    config = _config(tokenizer)
    multiple_choice = kerasbert.models.build_task_model(config, "multiple_choice")
    with pytest.raises(ValueError, match=f"{multiple_choice.name}.*rank 3"):
        text_tflite_model(multiple_choice, tokenizer)
    pretraining = kerasbert.models.build_pretraining_model(config)
    with pytest.raises(ValueError, match="masked_lm_positions"):
        text_tflite_model(pretraining, tokenizer)
    small = kerasbert.models.build_encoder(config.replace(vocab_size=100))
    with pytest.raises(ValueError, match="only 100"):
        text_tflite_model(small, tokenizer, max_seq_length=64)
    with pytest.raises(ValueError, match="64 positions"):
        text_tflite_model(small, tokenizer, max_seq_length=65)
    with pytest.raises(ValueError, match="max_seq_length"):
        text_tflite_model(model=_packed_ids_model(), tokenizer=tokenizer, max_seq_length=2)

