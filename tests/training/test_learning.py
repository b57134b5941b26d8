"""Proof that pretraining learns: a tiny BERT (MLM + NSP) and a tiny ELECTRA trained for a few
minutes on the shipped corpus, judged on a held-out shard against baselines measured on it.

Training reads shards 0-2 of `kerasbert.data.demo.pretraining_corpus_files()` (the BERT model
is the session's `pretrained_tiny_bert_file`, tests/conftest.py); every figure
asserted is measured on shard 3, which training never sees (`model.evaluate`), against the
best a model could do without learning: always predicting the held-out data's most frequent
masked token (MLM), its more frequent next-sentence label (NSP), and the RTD loss of the
untrained model on the same held-out batches and of the best constant guess. BERT trains for
3,000 steps of 32 x 64 tokens, ELECTRA (hidden 64, its recipe measured over seeds by
`python -m tests.proofs.electra measure`) for 1,000. Each test prints its figures and
baselines (`-s`); BUILD.md ("Learning proofs") gives them, with the command.
"""

import collections

import keras
import numpy as np
import pytest

from kerasbert.models.electra import ElectraPretrainer, generator_config
from kerasbert.training import create_optimizer
from tests.helpers import STEPS_PER_EXECUTION, demo_pretraining_dataset, tiny_demo_config

pytestmark = pytest.mark.slow

ELECTRA_STEPS, ELECTRA_LEARNING_RATE, ELECTRA_HIDDEN = 1000, 2e-3, 64
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
