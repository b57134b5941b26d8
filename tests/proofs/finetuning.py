"""The fine-tuning proof: pretraining helps fine-tuning (the BERT paper's central claim), at
miniature scale.

A tiny BERT (2 layers, hidden 128) pretrained (MLM + NSP) on the shipped corpus (the session's
tiny BERT, tests/pretrain_tiny_bert.py; judged in tests/training/test_learning.py) is fine-tuned
on the shipped WordNet gloss set (45 topic labels); the same model fine-tuned from random
initialisation is the baseline. Both arms have the same architecture, the same classifier head
weights, the same recipe, data order and dropout seed: only the encoder's initial weights
differ. Recipe: the first `TRAIN_EXAMPLES` training glosses (a random sample: the file is in
hash order), `EPOCHS` epochs of batches of 32 x 32 tokens, AdamW with 10% warm-up and linear
decay (`gloss.train`) at one learning rate for both arms.

The learning rate is chosen on the dev split only: `select` fine-tunes both arms at each of
`LEARNING_RATES` for each of `SELECTION_SEEDS` and picks the rate with the highest mean dev
Matthews correlation of the from-scratch arm, so that the gap is not an artefact of a rate that
starves the baseline. `LEARNING_RATE` is that choice. `measure` then fine-tunes both arms at
`LEARNING_RATE` for `MEASURED_SEEDS` (0-4) and scores the dev split and, once, the test
split. The test (tests/training/test_finetune_learning.py) runs one seed on the dev split. The figures are in
docs/finetuning.md, with these commands:

    .venv/bin/python -m tests.proofs.finetuning select    # LEARNING_RATES x SELECTION_SEEDS, dev
    .venv/bin/python -m tests.proofs.finetuning measure   # LEARNING_RATE, seeds 0-4, dev and test
"""

import os
import statistics
import time

import keras

import kerasbert
from kerasbert.training.glue_metrics import glue_metrics, is_degenerate
from tests.proofs import gloss

TRAIN_EXAMPLES, EPOCHS = 15_000, 2
LEARNING_RATES = (5e-4, 1e-3, 2e-3)
SELECTION_SEEDS = (0, 1)
LEARNING_RATE = 1e-3
MEASURED_SEEDS = tuple(range(5))
ARMS = ("pretrained", "from_scratch")


def _head_weights(model):
    """{path: variable} of the task model's variables outside its encoder (the classifier)."""
    encoder_paths = {variable.path for variable in model.encoder.weights}
    return {variable.path: variable for variable in model.weights
            if variable.path not in encoder_paths}


def arms(pretrained_file, seed):
    """{"pretrained", "from_scratch"}: the two classifiers before fine-tuning, with one
    classifier head (the from-scratch model's initial one, made under `seed`). The seed is also
    set before loading: a loaded model's dropout seed states are drawn then, not read from the
    file, so they would otherwise depend on what ran before in the process."""
    keras.utils.set_random_seed(seed)
    pretrained = keras.saving.load_model(pretrained_file)
    keras.utils.set_random_seed(seed)
    from_scratch = kerasbert.models.build_task_model(
        pretrained.encoder.config, "sequence_classification", num_labels=len(gloss.labels()),
        id2label=gloss.labels())
    pretrained_model = kerasbert.models.build_task_model(
        pretrained, "sequence_classification", num_labels=len(gloss.labels()),
        id2label=gloss.labels())
    scratch_head, pretrained_head = _head_weights(from_scratch), _head_weights(pretrained_model)
    if sorted(scratch_head) != sorted(pretrained_head) or len(scratch_head) != 2:
        raise AssertionError(f"the heads differ: {sorted(scratch_head)}, {sorted(pretrained_head)}")
    for path, variable in pretrained_head.items():
        variable.assign(scratch_head[path])
    return {"pretrained": pretrained_model, "from_scratch": from_scratch}


def run(tokenizer, pretrained_file, seed, learning_rate=LEARNING_RATE, splits=("dev",)):
    """{arm: {split: predicted label ids}} after fine-tuning both arms with `seed`."""
    train = gloss.glosses("train")[:TRAIN_EXAMPLES]
    evaluated = {split: gloss.glosses(split) for split in splits}
    predicted = {}
    for arm, model in arms(pretrained_file, seed).items():
        gloss.train(model, train, EPOCHS, learning_rate, tokenizer, seed)
        predicted[arm] = {split: gloss.predictions(model, examples, tokenizer)
                          for split, examples in evaluated.items()}
    return predicted


def scores(predicted):
    """{arm: {split: {"accuracy", "matthews_correlation"}}} of `run`'s predictions, and the
    degenerate ones ("arm on split")."""
    result, degenerate = {}, []
    for arm, by_split in predicted.items():
        result[arm] = {}
        for split, values in by_split.items():
            result[arm][split] = glue_metrics(gloss.TASK, gloss.gold(gloss.glosses(split)),
                                              values)
            if is_degenerate(values):
                degenerate.append(f"{arm} on {split}")
    return result, degenerate


def _kept_scores(arguments, seed, learning_rate, splits, name):
    """`scores(run(...))`, kept in `--results_dir` (a later call with the same settings reads
    it back)."""
    settings = {"learning_rate": learning_rate, "splits": list(splits),
                "train_examples": TRAIN_EXAMPLES, "epochs": EPOCHS, **gloss.RUN_SETTINGS,
                "tiny_bert": str(arguments.tiny_bert),
                "tiny_bert_bytes": os.path.getsize(arguments.tiny_bert)}
    return gloss.kept(
        arguments.results_dir / f"finetuning-{name}-{learning_rate:g}-seed{seed}.json", settings,
        lambda: scores(run(arguments.tokenizer, arguments.tiny_bert, seed, learning_rate, splits)))


def chosen(results):
    """The selection rule: the rate with the highest mean dev Matthews correlation of the
    from-scratch arm, over the seeds of `results` ({rate: {seed: scores}})."""
    return max(results, key=lambda rate: statistics.mean(
        seen["from_scratch"]["dev"]["matthews_correlation"] for seen in results[rate].values()))


def _select(arguments):
    seeds = arguments.seeds or SELECTION_SEEDS
    results, rows = {}, []
    for rate in LEARNING_RATES:
        results[rate] = {}
        for seed in seeds:
            start = time.time()
            results[rate][seed], degenerate = _kept_scores(arguments, seed, rate, ("dev",),
                                                           "select")
            print(f"rate {rate:g} seed {seed} in {time.time() - start:.0f} s: dev "
                  + ", ".join(f"{arm} MCC {result['dev']['matthews_correlation']:.4f} accuracy "
                              f"{result['dev']['accuracy']:.4f}"
                              for arm, result in results[rate][seed].items())
                  + (f"; degenerate: {degenerate}" if degenerate else ""), flush=True)
        for arm in ARMS:
            seen = [results[rate][seed][arm]["dev"] for seed in seeds]
            rows.append([f"{rate:g}", arm.replace("_", " "),
                         " / ".join(f"{s['matthews_correlation']:.3f}" for s in seen),
                         f"{statistics.mean(s['matthews_correlation'] for s in seen):.4f}",
                         " / ".join(f"{s['accuracy']:.3f}" for s in seen)])
    print(f"Dev split (whole), seeds {'/'.join(map(str, seeds))}:")
    print(gloss.table(["learning rate", "arm", "MCC", "MCC mean", "accuracy"], rows,
                      arguments.markdown))
    choice = chosen(results)
    print(f"chosen (highest mean dev MCC from scratch): {choice:g}"
          + ("" if choice == LEARNING_RATE else
             f"; LEARNING_RATE in tests/proofs/finetuning.py is {LEARNING_RATE:g}"))


def _measure(arguments):
    seeds = arguments.seeds or MEASURED_SEEDS
    print(f"learning rate {LEARNING_RATE:g}")
    rows, results, gaps = [], [], {split: {"matthews_correlation": [], "accuracy": []}
                      for split in gloss.EVAL_SPLITS}
    for seed in seeds:
        start = time.time()
        result, degenerate = _kept_scores(arguments, seed, LEARNING_RATE, gloss.EVAL_SPLITS,
                                          "measure")
        results.append(result)
        print(f"seed {seed} in {time.time() - start:.0f} s: " + "; ".join(
            f"{split} {arm} MCC {result[arm][split]['matthews_correlation']:.4f} accuracy "
            f"{result[arm][split]['accuracy']:.4f}" for split in gloss.EVAL_SPLITS for arm in ARMS)
              + (f"; degenerate: {degenerate}" if degenerate else ""), flush=True)
        for split in gloss.EVAL_SPLITS:
            pretrained, scratch = result["pretrained"][split], result["from_scratch"][split]
            for metric, values in gaps[split].items():
                values.append(pretrained[metric] - scratch[metric])
            rows.append([str(seed), split, f"{pretrained['matthews_correlation']:.3f}",
                         f"{pretrained['accuracy']:.3f}", f"{scratch['matthews_correlation']:.3f}",
                         f"{scratch['accuracy']:.3f}",
                         f"{gaps[split]['matthews_correlation'][-1]:+.3f}",
                         f"{gaps[split]['accuracy'][-1]:+.3f}"])
    print(gloss.table(["seed", "split", "pretrained MCC", "pretrained accuracy",
                       "from scratch MCC", "from scratch accuracy", "MCC gap", "accuracy gap"],
                      rows, arguments.markdown))
    for split, by_metric in gaps.items():
        arms_seen = {arm: [result[arm][split] for result in results] for arm in ARMS}
        print(f"{split}: " + "; ".join(
            f"{arm.replace('_', ' ')} MCC "
            f"{gloss.span([s['matthews_correlation'] for s in arms_seen[arm]])}, accuracy "
            f"{gloss.span([s['accuracy'] for s in arms_seen[arm]])}" for arm in ARMS)
              + f"; gap in MCC {gloss.span(by_metric['matthews_correlation'])}, "
              f"in accuracy {gloss.span(by_metric['accuracy'])}")


if __name__ == "__main__":
    arguments = gloss.script_arguments(__doc__.split("\n\n")[0], ("select", "measure"))
    {"select": _select, "measure": _measure}[arguments.mode](arguments)
