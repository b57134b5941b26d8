"""Proof that pretraining learns: a tiny BERT (MLM + NSP), a tiny ELECTRA and a tiny ModernBERT
(MLM only, 30% masking, 256-token sequences past its local window, as ModernBERT was trained)
trained for a few minutes on the shipped corpus, judged on a held-out shard against baselines
measured on it.

Training reads shards 0-2 of `kerasbert.data.demo.pretraining_corpus_files()` (the BERT model
is the session's `pretrained_tiny_bert_file`, tests/conftest.py); every figure
asserted is measured on shard 3, which training never sees (`model.evaluate`), against the
best a model could do without learning: always predicting the held-out data's most frequent
masked token (MLM), its more frequent next-sentence label (NSP), and the RTD loss of the
untrained model on the same held-out batches and of the best constant guess. BERT trains for
3,000 steps of 32 x 64 tokens, ELECTRA (hidden 64, its recipe measured over seeds by
`python -m tests.proofs.electra measure`) for 1,000, ModernBERT (hidden 64, byte-level BPE)
for MODERNBERT_STEPS. Each test prints its figures and
baselines (`-s`); BUILD.md ("Learning proofs") gives them, with the command.
"""

import collections

import keras
import numpy as np
import pytest

from kerasbert.data import PretrainingDataConfig, demo, pretraining_dataset
from kerasbert.models import build_pretraining_model
from kerasbert.models.electra import ElectraPretrainer, generator_config
from kerasbert.tokenizers import BytePairTokenizer
from kerasbert.training import create_optimizer
from tests.helpers import (STEPS_PER_EXECUTION, demo_pretraining_dataset, pretraining_shards,
                           tiny_demo_config)

pytestmark = pytest.mark.slow

ELECTRA_STEPS, ELECTRA_LEARNING_RATE, ELECTRA_HIDDEN = 1000, 2e-3, 64
MODERNBERT_STEPS, MODERNBERT_LENGTH, MODERNBERT_BATCH = 400, 256, 16
SEED = 0


def _baselines(held_out):
    """Accuracy of always answering the most frequent masked token / next-sentence label, and
    the standard error of an NSP accuracy near that rate on this many held-out pairs."""
    tokens, labels, predictions = collections.Counter(), collections.Counter(), 0
    for batch in held_out.as_numpy_iterator():
        real = batch["masked_lm_weights"] > 0
        tokens.update(batch["masked_lm_ids"][real].tolist())
        labels.update(batch["next_sentence_labels"].tolist())
        predictions += int(real.sum())
    pairs = sum(labels.values())
    majority = labels.most_common(1)[0][1] / pairs
    return tokens.most_common(1)[0][1] / predictions, majority, np.sqrt(
        majority * (1 - majority) / pairs)


def test_tiny_bert_learns_masked_lm_and_next_sentence(pretrained_tiny_bert_file, demo_tokenizer):
    model = keras.saving.load_model(pretrained_tiny_bert_file)
    held_out = demo_pretraining_dataset(demo_tokenizer, "nsp", held_out=True)
    mlm_baseline, nsp_baseline, nsp_error = _baselines(held_out)
    scores = model.evaluate(held_out, verbose=0, return_dict=True)
    print(f"held out: MLM accuracy {scores['mlm_logits_accuracy']:.3f} (most frequent token "
          f"{mlm_baseline:.3f}), NSP accuracy {scores['nsp_logits_accuracy']:.3f} (majority "
          f"label {nsp_baseline:.3f}, standard error {nsp_error:.3f})")
    assert scores["mlm_logits_accuracy"] > 2 * mlm_baseline
    # Four standard errors above always answering the majority label.
    assert scores["nsp_logits_accuracy"] > nsp_baseline + 4 * nsp_error


def _rtd_loss_and_base_rate_entropy(model, held_out):
    """The discriminator's mean sigmoid cross-entropy over the held-out real tokens, and that
    of the best constant guess, which knows only the fraction of tokens replaced."""
    losses, labels = [], []
    for batch in held_out.as_numpy_iterator():
        outputs = model({name: batch[name] for name in model._input_names})
        real = batch["padding_mask"] > 0
        logits = np.asarray(outputs["rtd_logits"], "float64")[real]
        replaced = np.asarray(outputs["rtd_labels"], "float64")[real]
        losses.append(np.maximum(logits, 0) - logits * replaced + np.log1p(np.exp(-np.abs(logits))))
        labels.append(replaced)
    losses, labels = np.concatenate(losses), np.concatenate(labels)
    rate = labels.mean()
    return losses.mean(), -(rate * np.log(rate) + (1 - rate) * np.log(1 - rate))


def electra_outcome(tokenizer, seed=SEED, steps=ELECTRA_STEPS,
                    learning_rate=ELECTRA_LEARNING_RATE, hidden_size=ELECTRA_HIDDEN):
    """Train the tiny ELECTRA (`hidden_size`, 2 layers, generator a quarter of it) for `steps`
    steps at peak `learning_rate` under `seed` and measure it on the held-out shard: a dict of
    the RTD loss before and after, the base-rate guess's, the generator's MLM accuracy and its
    baseline, and the training RTD loss of each quarter of the steps."""
    keras.utils.set_random_seed(seed)
    config = tiny_demo_config("electra_small_discriminator", tokenizer, embedding_size=128,
                              hidden_size=hidden_size, intermediate_size=4 * hidden_size)
    model = ElectraPretrainer(config, generator_config(config, 0.25), seed=seed)
    model.compile(optimizer=create_optimizer("adamw", learning_rate, num_train_steps=steps,
                                             num_warmup_steps=steps // 10),
                  steps_per_execution=STEPS_PER_EXECUTION)
    held_out = demo_pretraining_dataset(tokenizer, "electra", held_out=True)
    before, _ = _rtd_loss_and_base_rate_entropy(model, held_out)
    history = model.fit(demo_pretraining_dataset(tokenizer, "electra", held_out=False),
                        steps_per_epoch=steps // 4, epochs=4, verbose=0).history
    after, base_rate = _rtd_loss_and_base_rate_entropy(model, held_out)
    return {"before": before, "after": after, "base_rate": base_rate,
            "mlm_accuracy": model.evaluate(held_out, verbose=0, return_dict=True)["mlm_accuracy"],
            "mlm_baseline": _baselines(held_out)[0],
            "quarters": [float(loss) for loss in history["rtd_loss"]]}


def test_tiny_electra_rtd_loss_falls(demo_tokenizer):
    run = electra_outcome(demo_tokenizer)
    print(f"held out: RTD loss {run['before']:.4f} -> {run['after']:.4f} (base-rate guess "
          f"{run['base_rate']:.4f}); generator MLM accuracy {run['mlm_accuracy']:.3f} (most "
          f"frequent token {run['mlm_baseline']:.3f}); training RTD loss by quarter "
          f"{np.round(run['quarters'], 4).tolist()}")
    assert all(np.diff(run["quarters"]) < 0), run["quarters"]
    # Below the best constant guess: it tells replaced tokens from originals, beyond their rate.
    assert run["after"] < run["base_rate"] < run["before"]
    assert run["mlm_accuracy"] > 2 * run["mlm_baseline"]


def _modernbert_data(tokenizer, held_out):
    """ModernBERT's recipe on the demo corpus: full sentences to 256 tokens (its tiny model's
    window is 32), 30% of the tokens masked, no next-sentence task."""
    train_files, held_out_files = pretraining_shards()
    return pretraining_dataset(
        held_out_files if held_out else train_files, tokenizer, PretrainingDataConfig(
            objective="full_sentences", batch_size=MODERNBERT_BATCH,
            max_seq_length=MODERNBERT_LENGTH, masked_lm_prob=0.3,
            max_predictions_per_seq=int(0.3 * MODERNBERT_LENGTH),
            shuffle_buffer=0 if held_out else 2000),
        epochs=1 if held_out else None, seed=SEED + 1 if held_out else SEED)


def test_tiny_modernbert_learns_masked_lm_past_its_window():
    directory = demo.vocabulary_dir("byte_pair")
    tokenizer = BytePairTokenizer.from_files(f"{directory}/vocab.json", f"{directory}/merges.txt",
                                             pair_separators=1)
    keras.utils.set_random_seed(SEED)
    config = tiny_demo_config("modernbert_base", tokenizer, hidden_size=64, embedding_size=64,
                              num_layers=3,
                              intermediate_size=96, pad_token_id=tokenizer.pad_token_id,
                              max_positions=MODERNBERT_LENGTH, local_attention_window=32)
    assert [config.layer_attention(index)[1] for index in range(3)] == [None, 32, 32]
    model = build_pretraining_model(config)
    assert model.heads == ("mlm",)
    model.compile(optimizer=create_optimizer("adamw", 2e-3, num_train_steps=MODERNBERT_STEPS,
                                             num_warmup_steps=MODERNBERT_STEPS // 10),
                  steps_per_execution=STEPS_PER_EXECUTION)
    held_out = _modernbert_data(tokenizer, held_out=True)
    model.fit(_modernbert_data(tokenizer, held_out=False), steps_per_epoch=MODERNBERT_STEPS,
              epochs=1, verbose=0)
    scores = model.evaluate(held_out, verbose=0, return_dict=True)
    # (Keras names a one-output model's metric without the output's name)
    accuracy = scores.get("mlm_logits_accuracy", scores.get("accuracy"))
    baseline = _baselines_mlm(held_out)
    print(f"held out: MLM accuracy {accuracy:.3f} (most frequent token {baseline:.3f})")
    assert accuracy > 2 * baseline


def _baselines_mlm(held_out):
    """Accuracy of always answering the held-out data's most frequent masked token."""
    tokens, predictions = collections.Counter(), 0
    for batch in held_out.as_numpy_iterator():
        real = batch["masked_lm_weights"] > 0
        tokens.update(batch["masked_lm_ids"][real].tolist())
        predictions += int(real.sum())
    return tokens.most_common(1)[0][1] / predictions
