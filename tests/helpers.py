"""Tiny configurations, inputs and Hugging Face reference checkpoints shared by the tests."""

import os
import time

import numpy as np

import kerasbert.data.demo
import kerasbert.zoo
from kerasbert import EncoderConfig
from kerasbert.data import PretrainingDataConfig, pretraining_dataset

_SMALL = dict(vocab_size=120, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
              max_positions=64)

# One tiny config per family, each with its family's distinguishing features.
TINY_CONFIGS = {
    "bert": EncoderConfig(family="bert", **_SMALL),
    "roberta": EncoderConfig(family="roberta", **dict(_SMALL, max_positions=66), type_vocab_size=1,
                             pad_token_id=1, position_offset=2, layer_norm_epsilon=1e-5),
    "albert": EncoderConfig(family="albert", **dict(_SMALL, num_layers=4), embedding_size=16,
                            hidden_activation="gelu_new", num_hidden_groups=2, inner_group_num=2),
    "electra": EncoderConfig(family="electra", **_SMALL, embedding_size=16),
    "distilbert": EncoderConfig(family="distilbert", **_SMALL),
    # Three layers (global, local, local) with a window of 8 tokens: inputs of 10 reach past it.
    # Positions above QUERY_CHUNK, as ModernBERT's 8,192: the global layer's inference runs in
    # chunks of query rows (one chunk at these lengths) wherever the model is tested.
    "modernbert": EncoderConfig(family="modernbert", **dict(_SMALL, num_layers=3,
                                                            max_positions=2048),
                                pad_token_id=0, local_attention_window=8),
}

# transformers' DistilBertConfig names for BERT's config names (`hf_config` translates).
DISTILBERT_HF_NAMES = {"hidden_size": "dim", "num_hidden_layers": "n_layers",
                       "num_attention_heads": "n_heads", "intermediate_size": "hidden_dim",
                       "hidden_act": "activation", "hidden_dropout_prob": "dropout",
                       "attention_probs_dropout_prob": "attention_dropout"}
MODERNBERT_HF_NAMES = {"hidden_act": "hidden_activation", "layer_norm_eps": "norm_eps",
                       "hidden_dropout_prob": "embedding_dropout",
                       "attention_probs_dropout_prob": "attention_dropout"}


def random_inputs(config, batch=3, seq=10, seed=0):
    """Encoder inputs with right padding, a sentence pair (where segments exist) and [CLS]-like starts."""
    rng = np.random.default_rng(seed)
    low = config.pad_token_id + 2
    token_ids = rng.integers(low, config.vocab_size, size=(batch, seq)).astype("int32")
    lengths = np.linspace(seq, max(2, seq // 3), batch).astype(int)
    padding_mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    token_ids = np.where(padding_mask == 1, token_ids, config.pad_token_id).astype("int32")
    segment_ids = np.zeros_like(token_ids)
    if config.type_vocab_size > 1:
        for row, length in enumerate(lengths):
            segment_ids[row, length // 2:length] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def hf_config(family, **overrides):
    """A small `transformers` config of `family` (random weights are made from it).

    Overrides use BERT's names (`hidden_size`, `hidden_act`, ...) or the family's own; for
    DistilBERT the former are translated (`dim`, `activation`, ...)."""
    import transformers

    # initializer_range 0.2 (not 0.02) makes activations large enough that an exact vs tanh
    # GELU mix-up shows at ~1e-3, far above the 1e-5 parity tolerance.
    values = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=37, max_position_embeddings=64, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, initializer_range=0.2)
    config_class = {
        "bert": transformers.BertConfig,
        "roberta": transformers.RobertaConfig,
        "albert": transformers.AlbertConfig,
        "electra": transformers.ElectraConfig,
        "distilbert": transformers.DistilBertConfig,
        "modernbert": transformers.ModernBertConfig,
    }[family]
    if family == "roberta":
        values.update(max_position_embeddings=66, type_vocab_size=1, pad_token_id=1,
                      layer_norm_eps=1e-5)
    if family == "albert":
        values.update(embedding_size=16, hidden_act="gelu_new")
    if family == "electra":
        values.update(embedding_size=48)
    if family == "modernbert":
        # A window of 16 tokens, so that sequences of a few dozen tokens reach past it, and
        # none of ModernBertConfig's special-token ids (they lie beyond this vocabulary).
        values.update(max_position_embeddings=512, local_attention=16, layer_norm_eps=1e-5,
                      pad_token_id=0, bos_token_id=None, eos_token_id=None, cls_token_id=None,
                      sep_token_id=None, num_hidden_layers=3)
    values.update(overrides)
    if family == "distilbert":
        values = {DISTILBERT_HF_NAMES.get(name, name): value for name, value in values.items()}
    if family == "modernbert":
        values = {MODERNBERT_HF_NAMES.get(name, name): value for name, value in values.items()}
    return config_class(**values)


def save_hf_model(model_class_name, config, directory, seed=0, max_shard_size="50GB"):
    """Build `transformers.<model_class_name>` with random weights, save it to `directory`, return it."""
    import torch
    import transformers

    torch.manual_seed(seed)
    model = getattr(transformers, model_class_name)(config)
    with torch.no_grad():  # random, non-trivial LayerNorm and bias values
        for name, parameter in model.named_parameters():
            if (name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name
                    or name.endswith("norm.weight")):  # ModernBERT's norms
                parameter.add_(0.1 * torch.randn_like(parameter))
    model.eval()
    model.save_pretrained(directory, max_shard_size=max_shard_size)
    return model


def save_modernbert_tokenizer(directory):
    """A ModernBERT-style tokenizer folder (`tokenizer.json`: byte-level BPE over the shipped
    byte-pair vocabulary, BERT's special tokens added after it, `[MASK]` with lstrip, the
    `[CLS] A [SEP] B [SEP]` template, no token types), as transformers saves ModernBERT's;
    returns transformers' fast tokenizer of it."""
    import tokenizers
    import transformers

    vocabulary = kerasbert.data.demo.vocabulary_dir("byte_pair")
    backend = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(
        f"{vocabulary}/vocab.json", f"{vocabulary}/merges.txt"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = tokenizers.decoders.ByteLevel()
    backend.add_special_tokens(["[UNK]", "[CLS]", "[SEP]", "[PAD]",
                                tokenizers.AddedToken("[MASK]", lstrip=True)])
    backend.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[(token, backend.token_to_id(token)) for token in ("[CLS]", "[SEP]")])
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        pad_token="[PAD]", mask_token="[MASK]",
        model_input_names=["input_ids", "attention_mask"]).save_pretrained(directory)
    return transformers.AutoTokenizer.from_pretrained(directory)


# family -> (transformers class, the shipped vocabulary its tokenizer uses)
SENTENCE_TRANSFORMERS_FAMILIES = {
    "bert": ("BertModel", "wordpiece"), "roberta": ("RobertaModel", "byte_pair"),
    "albert": ("AlbertModel", "sentence_piece"), "electra": ("ElectraModel", "wordpiece"),
    "distilbert": ("DistilBertModel", "wordpiece"), "modernbert": ("ModernBertModel", "byte_pair")}


def save_sentence_transformers_model(directory, family, pooling="mean", dense=(), normalize=False,
                                     max_seq_length=24):
    """A random tiny `family` encoder with the shipped tokenizer of its kind, as a
    sentence-transformers folder with `pooling`, Dense layers `(units, torch activation)` and
    Normalize; returns the folder and sentence-transformers' model loaded from it."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules

    from kerasbert.convert.hf_tokenizer_files import tokenizer_files
    from kerasbert.tokenizers import from_hf as tokenizer_from_hf

    model_class, tokenizer_kind = SENTENCE_TRANSFORMERS_FAMILIES[family]
    transformer_dir = directory / "transformer"
    if family == "modernbert":  # transformers reads its tokenizer from tokenizer.json only
        transformer_dir.mkdir(parents=True)
        tokenizer = tokenizer_from_hf(save_modernbert_tokenizer(transformer_dir).name_or_path)
        files = {}
    else:
        tokenizer = tokenizer_from_hf(kerasbert.data.demo.vocabulary_dir(tokenizer_kind))
        files = tokenizer_files(tokenizer, model_max_length=64)
    config = hf_config(family, vocab_size=tokenizer.vocabulary_size(),
                       pad_token_id=tokenizer.pad_token_id)
    save_hf_model(model_class, config, transformer_dir)
    for name, content in files.items():
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(transformer_dir / name, mode) as file:
            file.write(content)
    hidden = config.hidden_size if family != "distilbert" else config.dim
    stack = [modules.Transformer(str(transformer_dir), max_seq_length=max_seq_length),
             modules.Pooling(hidden, pooling_mode=pooling)]
    torch.manual_seed(1)
    width = stack[-1].get_embedding_dimension()
    for units, activation in dense:
        stack.append(modules.Dense(width, units, activation_function=activation))
        width = units
    if normalize:
        stack.append(modules.Normalize())
    folder = directory / "sentence_transformers"
    SentenceTransformer(modules=stack, device="cpu").save(str(folder))
    return folder, SentenceTransformer(str(folder), device="cpu")


def hf_outputs(model, inputs):
    """Run a `transformers` encoder on kerasbert-style numpy inputs."""
    return run_hf_model(model, inputs, output_hidden_states=True)


def run_hf_model(model, inputs, **kwargs):
    """Call a `transformers` model on kerasbert-style numpy inputs (`[batch, seq]` or
    `[batch, choices, seq]`); DistilBERT and ModernBERT, which have no token types, get no
    `token_type_ids`."""
    import torch

    arguments = dict(input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
                     attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.long))
    if model.config.model_type not in ("distilbert", "modernbert"):
        arguments["token_type_ids"] = torch.tensor(inputs["segment_ids"], dtype=torch.long)
    with torch.no_grad():
        return model(**arguments, **kwargs)


def model_garden_squad_lib():
    """Model Garden's SQuAD library and tokenization module. `squad_lib` imports `tf_keras`
    without using it, and tf_keras is not installed (tf-models-official is installed --no-deps):
    a placeholder module stands in while it is imported."""
    import sys
    import types

    import pytest

    with pytest.MonkeyPatch.context() as patch:
        if "tf_keras" not in sys.modules:
            patch.setitem(sys.modules, "tf_keras", types.ModuleType("tf_keras"))
        from official.nlp.data import squad_lib
        from official.nlp.tools import tokenization
    return squad_lib, tokenization


def demo_wordpiece_tokenizer():
    """BERT's WordPiece tokenizer over the demo vocabulary that ships with kerasbert."""
    return kerasbert.zoo.build_tokenizer("bert_tiny_uncased",
                                         kerasbert.data.demo.vocabulary_dir("wordpiece"))


def first_pretraining_batch(tokenizer, objective, max_seq_length, max_predictions_per_seq):
    """The first batch (8 instances) of the demo corpus's pretraining pipeline, as numpy."""
    dataset = pretraining_dataset(kerasbert.data.demo.pretraining_corpus_files(), tokenizer,
                                  PretrainingDataConfig(
                                      objective=objective, batch_size=8,
                                      max_seq_length=max_seq_length,
                                      max_predictions_per_seq=max_predictions_per_seq,
                                      shuffle_buffer=50))
    return {name: value.numpy() for name, value in next(iter(dataset)).items()}


# The tiny BERT pretraining recipe on the demo corpus (tests/training/conftest.py trains it).

PRETRAINING_LENGTH, PRETRAINING_PREDICTIONS, PRETRAINING_BATCH = 64, 10, 32
# Random next sentences come from any document of a shard (183-184 documents), as in Google's
# create_pretraining_data, rather than from windows of 64 neighbouring pages on one topic.
PRETRAINING_WINDOW = 256
PRETRAINING_STEPS, PRETRAINING_LEARNING_RATE = 3000, 1e-3
PRETRAINING_SEED = 0
# Training steps per compiled call in the learning tests: ~12% faster on 2 cores than one step per
# call (Python's per-step overhead), with the same weights and losses step for step.
STEPS_PER_EXECUTION = 50


def pretraining_shards():
    """(training shards, held-out shard): the first three demo corpus files, and the last."""
    files = kerasbert.data.demo.pretraining_corpus_files()
    return files[:-1], files[-1:]


def demo_pretraining_dataset(tokenizer, objective, held_out):
    """The demo corpus's pretraining batches: endless and shuffled for training, one pass over
    the held-out shard otherwise."""
    train_files, held_out_files = pretraining_shards()
    return pretraining_dataset(
        held_out_files if held_out else train_files, tokenizer, PretrainingDataConfig(
            objective=objective, batch_size=PRETRAINING_BATCH, max_seq_length=PRETRAINING_LENGTH,
            max_predictions_per_seq=PRETRAINING_PREDICTIONS,
            shuffle_buffer=0 if held_out else 5000, window_size=PRETRAINING_WINDOW),
        epochs=1 if held_out else None,
        seed=PRETRAINING_SEED + 1 if held_out else PRETRAINING_SEED)


def tiny_demo_config(preset, tokenizer, **overrides):
    """`preset`'s config shrunk to 2 layers of hidden size 128 over the demo vocabulary
    (`overrides` replace any of these)."""
    shape = dict(vocab_size=tokenizer.vocabulary_size(), num_layers=2, hidden_size=128,
                 num_heads=2, intermediate_size=512, max_positions=PRETRAINING_LENGTH)
    return kerasbert.zoo.get_config(preset).replace(**{**shape, **overrides})


def masked_positions(inputs, count, seed):
    """`count` positions per row inside its real tokens (repeats allowed, as padding does)."""
    rng = np.random.default_rng(seed)
    lengths = inputs["padding_mask"].sum(1)
    return np.stack([rng.integers(0, length, size=count) for length in lengths]).astype("int32")


def assert_pretraining_outputs_match(model, reference, output_names, tolerance=1e-5):
    """A kerasbert pretraining model's outputs equal a `transformers` model's on two input
    shapes; `output_names` maps transformers' output names to ours (MLM logits are compared at
    the masked positions)."""
    for seed, (batch, seq) in enumerate([(3, 12), (2, 7)]):
        inputs = random_inputs(model.encoder.config, batch=batch, seq=seq, seed=seed)
        if "masked_lm_positions" in model.input:
            inputs["masked_lm_positions"] = masked_positions(inputs, 4, seed)
        expected = hf_outputs(reference, inputs)
        outputs = model(inputs)
        for theirs, ours in output_names.items():
            want = getattr(expected, theirs).numpy()
            if ours == "mlm_logits":
                want = np.take_along_axis(want, inputs["masked_lm_positions"][..., None], axis=1)
            assert outputs[ours].shape == want.shape
            np.testing.assert_allclose(outputs[ours], want, rtol=0, atol=tolerance,
                                       err_msg=f"{type(reference).__name__} {ours}")


def run_shared_folder(tmp_path_factory):
    """The test run's temporary folder that every pytest-xdist worker shares (each worker's own
    is below it), for what is made once per run under a file lock."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this run's folder, above each worker's own
    return shared


def finish_processes(processes, timeout_seconds):
    """(exit status, output) of each of `processes` (started with `stdout=PIPE`, text); one still
    running after `timeout_seconds` in all (a hung collective, say) is killed and fails the test."""
    deadline = time.monotonic() + timeout_seconds
    try:
        outputs = [process.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
                   for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return [(process.returncode, output) for process, output in zip(processes, outputs)]
