"""sentence-transformers folders imported with `from_hf` embed raw text as
`SentenceTransformer(folder).encode` does: every family, every pooling mode, Dense layers with
their activations, Normalize, old-style folders; and the folders it refuses."""

import json
import shutil

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

import kerasbert
from kerasbert.convert.sentence_transformers_folder import SentenceTransformersFolderError
from kerasbert.data import demo
from kerasbert.tokenizers import from_hf as tokenizer_from_hf
from kerasbert.tokenizers.text_files import iterate_lines
from tests.helpers import save_sentence_transformers_model

TOLERANCE = 1e-5
MAX_SEQ_LENGTH = 24  # save_sentence_transformers_model's
# Real lines of the shipped corpus: some far longer than MAX_SEQ_LENGTH tokens (truncated), some
# short (padded in a batch), and one empty text.
TEXTS = [line for line in iterate_lines(demo.pretraining_corpus_files()[:1])][:40:3] + [
    "A gloss.", "", "the same words, the same words, the same words"]


def _our_embeddings(model, folder, texts):
    tokenizer = tokenizer_from_hf(folder)
    inputs = tokenizer(texts, max_length=model.max_seq_length, padding="longest")
    return np.asarray(model(inputs)["embedding"])


CASES = [("bert", mode, (), False) for mode in
         ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")] + [
    ("bert", ("cls", "mean", "max"), ((20, torch.nn.Tanh()), (12, torch.nn.Identity())), True),
    ("roberta", "mean", (), True),
    ("roberta", "cls", ((16, torch.nn.GELU()),), False),
    ("albert", "mean", (), True),
    ("albert", "weightedmean", ((16, torch.nn.ReLU()),), True),
    ("electra", "mean", (), True),
    ("electra", "max", ((16, torch.nn.Sigmoid()),), False),
    ("distilbert", "mean", (), True),
    ("distilbert", "lasttoken", ((16, torch.nn.SiLU()),), True),
    ("modernbert", "mean", (), True),
    ("modernbert", "cls", ((16, torch.nn.Tanh()),), False),
]


def _case_id(case):
    family, pooling, dense, normalize = case
    return "-".join([family, pooling if isinstance(pooling, str) else "+".join(pooling)]
                    + [type(activation).__name__ for _, activation in dense]
                    + (["normalize"] if normalize else []))


@pytest.mark.parametrize("case", CASES, ids=[_case_id(case) for case in CASES])
def test_embeddings_match_sentence_transformers(case, tmp_path):
    family, pooling, dense, normalize = case
    folder, reference = save_sentence_transformers_model(tmp_path, family, pooling, dense, normalize)
    model = kerasbert.convert.from_hf(folder)
    assert isinstance(model, kerasbert.models.TextEmbeddingModel)
    assert (model.encoder.config.family, model.normalize, model.max_seq_length) == (
        family, normalize, MAX_SEQ_LENGTH)
    expected = reference.encode(TEXTS, batch_size=4, convert_to_numpy=True)
    ours = _our_embeddings(model, folder, TEXTS)
    assert ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, rtol=0, atol=TOLERANCE)
    if normalize:
        np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)



@pytest.mark.parametrize("family,pooling", [("bert", "lasttoken"), ("roberta", "mean")])
def test_encode_sorts_batches_and_returns_sentence_transformers_vectors_in_order(
        family, pooling, tmp_path):
    """`TextEmbeddingModel.encode` (sorted by length, batches cut to their longest text
    rounded up to 8 tokens; RoBERTa pads with id 1) gives `encode`'s vectors in input order."""
    folder, reference = save_sentence_transformers_model(tmp_path, family, pooling,
                                                         normalize=True)
    model = kerasbert.convert.from_hf(folder)
    expected = reference.encode(TEXTS, batch_size=4, convert_to_numpy=True)
    ours = model.encode(TEXTS, tokenizer_from_hf(folder), batch_size=4)
    assert ours.dtype == np.float32 and ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(model.encode(TEXTS[3], tokenizer_from_hf(folder)),
                               expected[3:4], rtol=0, atol=TOLERANCE)
    assert model.encode([], tokenizer_from_hf(folder)).shape == (0, expected.shape[1])


def test_encode_prepends_the_default_prompt_or_the_one_named(tmp_path):
    """A folder with prompts and a `default_prompt_name` (as e5- and bge-style models ship):
    `encode` prepends the default prompt, or the one `prompt_name` names, as
    `SentenceTransformer.encode` does; `to_hf` writes both back."""
    folder, _ = save_sentence_transformers_model(tmp_path / "source", "bert", "mean",
                                                 normalize=True)
    _edit_json(folder / "config_sentence_transformers.json", lambda settings: {
        **settings, "prompts": {"query": "query: ", "passage": "passage: "},
        "default_prompt_name": "query"})
    reference = SentenceTransformer(str(folder), device="cpu")
    model = kerasbert.convert.from_hf(folder)
    tokenizer = tokenizer_from_hf(folder)
    assert model.default_prompt_name == "query"
    expected = reference.encode(TEXTS, batch_size=4)
    np.testing.assert_allclose(model.encode(TEXTS, tokenizer), expected, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(_our_embeddings(model, folder, ["query: " + text for text in TEXTS]),
                               expected, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(model.encode(TEXTS, tokenizer, prompt_name="passage"),
                               reference.encode(TEXTS, batch_size=4, prompt_name="passage"),
                               rtol=0, atol=TOLERANCE)
    assert np.abs(model.encode(TEXTS, tokenizer) -
                  _our_embeddings(model, folder, TEXTS)).max() > 1e-3  # the prompt matters
    with pytest.raises(ValueError, match=r"prompt_name 'title': .* has the prompts "
                                         r"\['passage', 'query'\]"):
        model.encode(TEXTS, tokenizer, prompt_name="title")
    written = kerasbert.convert.to_hf(model, tmp_path / "written", tokenizer=tokenizer)
    again = SentenceTransformer(str(written), device="cpu")
    assert (again.default_prompt_name, again.prompts["passage"]) == ("query", "passage: ")
    np.testing.assert_allclose(again.encode(TEXTS, batch_size=4), expected, rtol=0,
                               atol=TOLERANCE)

def test_reads_old_style_folders_prompts_and_similarity(tmp_path):
    """Boolean pooling keys, max_seq_length in sentence_bert_config.json (which wins over the
    tokenizer's), prompts and the similarity function, as older sentence-transformers wrote."""
    folder, _ = save_sentence_transformers_model(tmp_path, "bert", "mean_sqrt_len_tokens",
                                              normalize=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 32, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": True}))
    transformer_dir = folder / "0_Transformer"  # a Transformer module in its own folder
    shutil.copytree(tmp_path / "transformer", transformer_dir)
    (transformer_dir / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": 16, "do_lower_case": False}))
    (folder / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: "}, "default_prompt_name": None,
         "similarity_fn_name": "dot"}))
    modules_file = folder / "modules.json"
    entries = json.loads(modules_file.read_text())
    entries[0]["path"] = "0_Transformer"
    entries[0]["type"] = "sentence_transformers.models.Transformer"
    modules_file.write_text(json.dumps(entries))
    reference = SentenceTransformer(str(folder), device="cpu")
    model = kerasbert.convert.from_hf(folder)
    assert (model.pooling, model.max_seq_length, model.similarity, model.prompts) == (
        "mean_sqrt_len_tokens", 16, "dot", {"query": "query: "})
    np.testing.assert_allclose(_our_embeddings(model, folder, TEXTS),
                               reference.encode(TEXTS), rtol=0, atol=TOLERANCE)
    assert isinstance(kerasbert.convert.from_hf(folder, encoder_only=True),
                      kerasbert.models.Encoder)


@pytest.mark.parametrize("edit,message", [
    (lambda folder: _edit_json(folder / "modules.json", lambda entries: entries + [
        {"idx": 9, "name": "9", "path": "9_LayerNorm",
         "type": "sentence_transformers.models.LayerNorm"}]),
     "module 3 is a sentence_transformers.models.LayerNorm"),
    (lambda folder: _edit_json(folder / "modules.json", lambda entries: [
        entries[0], entries[2], entries[1]]),
     r"are not a Transformer, Pooling"),
    (lambda folder: _edit_json(folder / "modules.json", lambda entries: [
        {**entries[0], "path": "../elsewhere"}] + entries[1:]),
     r"module 0's path '../elsewhere' leaves the folder"),
    (lambda folder: _edit_json(folder / "2_Dense" / "config.json", lambda settings: {
        **settings, "activation_function": "my_package.Swish"}),
     "2_Dense/config.json: activation_function 'my_package.Swish'"),
    (lambda folder: _edit_json(folder / "1_Pooling" / "config.json", lambda settings: {
        **settings, "include_prompt": False}),
     "1_Pooling/config.json: include_prompt is false"),
    (lambda folder: _edit_json(folder / "1_Pooling" / "config.json", lambda settings: {
        **settings, "pooling_mode": "median"}),
     "pooling mode 'median'"),
    (lambda folder: _edit_json(folder / "config_sentence_transformers.json", lambda settings: {
        **settings, "prompts": {"query": "query: "}, "default_prompt_name": "passage"}),
     "config_sentence_transformers.json: default_prompt_name 'passage' is not one of its "
     r"prompts \['query'\]"),
])
def test_refuses_folders_it_cannot_reproduce(edit, message, tmp_path):
    folder, _ = save_sentence_transformers_model(tmp_path, "bert", "mean",
                                              dense=((8, torch.nn.Tanh()),))
    edit(folder)
    with pytest.raises(SentenceTransformersFolderError, match=message):
        kerasbert.convert.from_hf(folder)


def _edit_json(path, change):
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


def test_tokenizer_comes_from_the_transformer_module_and_keeps_its_lower_casing(tmp_path):
    folder, _ = save_sentence_transformers_model(tmp_path, "roberta", "mean")
    assert tokenizer_from_hf(folder).tokenize(["Hello"]).to_list() == \
        tokenizer_from_hf(tmp_path / "transformer").tokenize(["Hello"]).to_list()
    (folder / "sentence_bert_config.json").write_text(json.dumps({"do_lower_case": True}))
    with pytest.raises(SentenceTransformersFolderError,
                       match="lower-cases the text before a BytePairTokenizer"):
        tokenizer_from_hf(folder)


def test_writes_back_a_folder_sentence_transformers_loads_to_the_same_vectors(tmp_path):
    folder, reference = save_sentence_transformers_model(
        tmp_path / "source", "bert", ("cls", "mean"), dense=((12, torch.nn.Tanh()),),
        normalize=True)
    model = kerasbert.convert.from_hf(folder)
    written = kerasbert.convert.to_hf(model, tmp_path / "written",
                                      tokenizer=tokenizer_from_hf(folder))
    np.testing.assert_allclose(SentenceTransformer(str(written), device="cpu").encode(TEXTS),
                               reference.encode(TEXTS), rtol=0, atol=TOLERANCE)
    settings = ("pooling", "dense_layers", "normalize", "similarity", "prompts", "max_seq_length")
    read_back = kerasbert.convert.from_hf(written)
    assert {name: read_back.get_config()[name] for name in settings} == {
        name: model.get_config()[name] for name in settings}
    assert read_back.encoder.config == model.encoder.config


def test_kerasbert_convert_writes_a_trained_keras_model_as_a_sentence_transformers_folder(
        tmp_path):
    """A model built in kerasbert (RoBERTa, two modes, a GELU Dense, prompts, dot similarity),
    saved as .keras and converted as `kerasbert-convert --tokenizer_dir` does."""
    from kerasbert.convert.conversions import convert
    from tests.helpers import TINY_CONFIGS

    vocabulary = demo.vocabulary_dir("byte_pair")
    tokenizer = tokenizer_from_hf(vocabulary)
    config = TINY_CONFIGS["roberta"].replace(vocab_size=tokenizer.vocabulary_size())
    model = kerasbert.models.build_task_model(
        config, "text_embedding", pooling=["max", "weightedmean"],
        dense_layers=[{"units": 10, "activation": "gelu"}, {"units": 6, "activation": "linear",
                                                           "use_bias": False}],
        normalize=False, similarity="dot", prompts={"query": "query: "}, max_seq_length=20)
    model.save(tmp_path / "model.keras")
    output = str(tmp_path / "embedder")
    convert(str(tmp_path / "model.keras"), output, tokenizer_dir=vocabulary)
    theirs = SentenceTransformer(output, device="cpu")
    assert (theirs.similarity_fn_name, theirs.prompts["query"], theirs.max_seq_length) == (
        "dot", "query: ", 20)
    ours = np.asarray(model(tokenizer(TEXTS, max_length=20, padding="longest"))["embedding"])
    np.testing.assert_allclose(theirs.encode(TEXTS), ours, rtol=0, atol=TOLERANCE)
