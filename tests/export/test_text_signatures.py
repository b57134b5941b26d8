"""Raw-text signatures equal the Hugging Face tokenizer + model on raw strings: the SavedModel's
`serve_text`, `serve_text_pair` and `serve_examples` for BERT (WordPiece), RoBERTa (byte-level
BPE) and ALBERT (SentencePiece) on the adversarial tokenizer set, and BERT's
`model_text.tflite` on Latin-script text with accents, each loaded by its own runtime (the
exporter has run them in a fresh process that never imports kerasbert).

The signatures pad a batch only to the bucket of its longest text (`padding_buckets`); the
reference is Hugging Face padding to `MAX_SEQ_LENGTH` (as the signatures did before buckets),
its sequence outputs cut to that bucket: texts of several lengths, in one batch and each alone,
give the fixed-padding outputs, so the padding is masked."""

import shutil

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

import kerasbert
from kerasbert.data import demo
from kerasbert.export.padding_buckets import expected_width
from tests.export.artifacts import run_text_signatures
from tests.helpers import hf_config, save_hf_model, save_modernbert_tokenizer
from tests.tokenizer_cases import ADVERSARIAL_TEXTS

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 48
TOLERANCE = 1e-4
PAIRS = (ADVERSARIAL_TEXTS[4:10], ADVERSARIAL_TEXTS[-6:])
LATIN_TEXTS = ["Héllo Wörld ÀÉÎÕÜ naïve café résumé Ångström",
               "Crème brûlée, señor! Über façade; déjà vu.",
               "The quick brown fox jumps over the lazy dog. " * 8]


def save_tokenizer(family, directory):
    if family == "bert":
        tokenizer = transformers.BertTokenizer.from_pretrained(demo.vocabulary_dir("wordpiece"))
    elif family == "roberta":
        source = demo.vocabulary_dir("byte_pair")
        tokenizer = transformers.RobertaTokenizer(vocab=f"{source}/vocab.json",
                                                  merges=f"{source}/merges.txt")
    else:
        shutil.copy(f"{demo.vocabulary_dir('sentence_piece')}/spiece.model", directory)
        tokenizer = transformers.AlbertTokenizer.from_pretrained(str(directory))
    tokenizer.save_pretrained(directory)
    return transformers.AutoTokenizer.from_pretrained(str(directory))


def examples(texts, pair_texts):
    serialized = []
    for text, pair in zip(texts, pair_texts):
        feature = {"text": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[text.encode("utf-8")]))}
        if pair is not None:
            feature["text_pair"] = tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[pair.encode("utf-8")]))
        serialized.append(tf.train.Example(features=tf.train.Features(
            feature=feature)).SerializeToString())
    return serialized


def hf_outputs(model, tokenizer, texts, pair_texts=None):
    encoded = tokenizer(texts, pair_texts, max_length=MAX_SEQ_LENGTH, truncation="longest_first",
                        padding="max_length", return_token_type_ids=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**encoded)
    return {"sequence_output": out.last_hidden_state.numpy(),
            "pooled_output": out.pooler_output.numpy(),
            "padding_mask": encoded["attention_mask"].numpy()}


def to_bucket(outputs):
    """Fixed-padding outputs as the signatures give them: the sequence cut to the bucket."""
    width = expected_width(outputs["padding_mask"], MAX_SEQ_LENGTH)
    return {"sequence_output": outputs["sequence_output"][:, :width],
            "pooled_output": outputs["pooled_output"]}


def assert_alone_close(produced_rows, model, tokenizer, texts, where):
    """Each text run alone gives Hugging Face's fixed-padding outputs cut to its own bucket;
    the texts span more than one bucket."""
    widths = set()
    for text, produced in zip(texts, produced_rows, strict=True):
        expected = hf_outputs(model, tokenizer, [text])
        widths.add(produced["sequence_output"].shape[1])
        assert_close(produced, to_bucket(expected), f"{where} alone {text[:20]!r}")
    assert len(widths) > 1, widths


def assert_close(produced, expected, where):
    assert sorted(produced) == sorted(expected), where
    for name, value in expected.items():
        scale = max(1.0, float(np.abs(value).max()))
        difference = float(np.abs(produced[name] - value).max()) / scale
        assert difference <= TOLERANCE, f"{where} {name}: {difference}"


@pytest.mark.parametrize("family", ["bert", "roberta", "albert"])
def test_text_signatures_equal_hugging_face(family, tmp_path):
    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    hf_tokenizer = save_tokenizer(family, hf_dir)
    # The window is below the model's positions, and as wide as its hidden size: a pooled
    # output [batch, hidden] then has the shape of a sequence output cut to the window, which
    # the verifier once took for one (and cut, reporting a difference of inf).
    positions = 2 * MAX_SEQ_LENGTH + (2 if family == "roberta" else 0)
    config = hf_config(family, vocab_size=len(hf_tokenizer), max_position_embeddings=positions,
                       hidden_size=MAX_SEQ_LENGTH)
    reference = save_hf_model(f"{family.capitalize()}Model", config, hf_dir)
    formats = ("saved_model", "tflite") if family == "bert" else ("saved_model",)
    report = kerasbert.export.export(hf_dir, tmp_path / "out", formats=formats,
                                     max_seq_length=MAX_SEQ_LENGTH, text_signatures=True)
    assert report["artifacts"]["saved_model"]["verified"]

    single_and_pair = [None, PAIRS[1][0], None, PAIRS[1][2]]
    results = run_text_signatures(
        str(tmp_path / "out"), ADVERSARIAL_TEXTS, [list(p) for p in PAIRS],
        examples(PAIRS[0][:4], single_and_pair),
        text_tflite_texts=LATIN_TEXTS if family == "bert" else None)

    assert_close(results["serve_text"],
                 to_bucket(hf_outputs(reference, hf_tokenizer, ADVERSARIAL_TEXTS)), "serve_text")
    assert_alone_close(results["serve_text alone"], reference, hf_tokenizer, ADVERSARIAL_TEXTS,
                       "serve_text")
    assert_close(results["serve_text_pair"],
                 to_bucket(hf_outputs(reference, hf_tokenizer, list(PAIRS[0]), list(PAIRS[1]))),
                 "serve_text_pair")
    expected_rows = [hf_outputs(reference, hf_tokenizer, [text], None if pair is None else [pair])
                     for text, pair in zip(PAIRS[0][:4], single_and_pair)]
    assert_close(results["serve_examples"],
                 to_bucket({name: np.concatenate([row[name] for row in expected_rows])
                            for name in expected_rows[0]}), "serve_examples")
    if family == "bert":
        assert "model_text.tflite" in report["artifacts"]
        assert_close(results["model_text.tflite"],
                     to_bucket(hf_outputs(reference, hf_tokenizer, LATIN_TEXTS)),
                     "model_text.tflite")
        assert_alone_close(results["model_text.tflite alone"], reference, hf_tokenizer,
                           LATIN_TEXTS, "model_text.tflite")
    else:
        assert "model_text.tflite" not in report["artifacts"]


@pytest.mark.parametrize("family", ["electra", "distilbert", "modernbert"])
def test_every_family_s_text_signatures_verify_below_its_positions(family, tmp_path):
    """The families the test above leaves out (two WordPiece ones, and ModernBERT with its
    `tokenizer.json`: byte-level BPE, `[CLS] A [SEP] B [SEP]`): a plain encoder whose hidden
    size equals the window, exported with text signatures below its positions, verifies (the
    exporter compares every signature with the Keras model in a fresh process)."""
    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    hf_tokenizer = (save_modernbert_tokenizer(hf_dir) if family == "modernbert"
                    else save_tokenizer("bert", hf_dir))
    config = hf_config(family, vocab_size=len(hf_tokenizer), hidden_size=MAX_SEQ_LENGTH,
                       max_position_embeddings=2 * MAX_SEQ_LENGTH,
                       pad_token_id=hf_tokenizer.pad_token_id,
                       **({"embedding_size": MAX_SEQ_LENGTH} if family == "electra" else {}))
    model_class = {"electra": "ElectraModel", "distilbert": "DistilBertModel",
                   "modernbert": "ModernBertModel"}[family]
    save_hf_model(model_class, config, hf_dir)
    report = kerasbert.export.export(hf_dir, tmp_path / "out", formats=("saved_model",),
                                     max_seq_length=MAX_SEQ_LENGTH, text_signatures=True)
    entry = report["artifacts"]["saved_model"]
    assert entry["verified"]
    checked = {(check.get("signature"), check.get("output")) for check in entry["checks"]}
    assert {("serve_text", "sequence_output"), ("serve_text_pair", "sequence_output"),
            ("serve_examples", "sequence_output")} <= checked
