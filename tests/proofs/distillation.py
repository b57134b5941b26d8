"""The task-distillation proof: a 2-layer student taught by a 4-layer teacher keeps a clearly
larger share of the teacher's accuracy than the same student trained alone.

Teacher: 4 layers of hidden size 128, the session's tiny BERT pretrained on the shipped corpus
(tests/pretrain_tiny_bert.py, 2 layers) with two new layers on top (random initialisation: with
BERT's small initial weights a new residual block starts near the identity), fine-tuned for
`Recipe.teacher_epochs` epochs on the first `TEACHER_EXAMPLES` training glosses of the shipped
WordNet gloss set (45 topic labels). Student: 2 layers of hidden size 128 from random
initialisation, trained for `STUDENT_EPOCHS` epochs on the next `STUDENT_EXAMPLES` training
glosses, which the teacher never saw (a teacher's soft targets on its own training examples are
close to its hard labels). The student's two arms start from the same weights and dropout seed
states and train the same steps on the same batches in the same order: one with the teacher
(`TaskDistiller`: soft targets at `Recipe.temperature` weighted `Recipe.alpha`, hard labels
`1 - alpha`), one on the hard labels alone. All train in batches of 32 x 32 tokens, AdamW 1e-3
with 10% warm-up and linear decay (`gloss.train`).

The recipe is chosen on the dev split only: `select` trains every recipe of `GRID` for each of
`SELECTION_SEEDS` and picks the one whose taught student has the highest mean dev accuracy
(what a user of distillation wants: the best student; not the statistic the proof asserts).
`RECIPE` is that choice. `measure` then runs `RECIPE` for `MEASURED_SEEDS` (0-3) and scores the
dev split and, once, the test split. The test (tests/training/test_distillation_proof.py) runs one seed of
`RECIPE` on the dev split. Their figures are in docs/distillation.md, with these commands:

    .venv/bin/python -m tests.proofs.distillation select    # GRID x SELECTION_SEEDS on dev
    .venv/bin/python -m tests.proofs.distillation measure   # RECIPE, seeds 0-3, dev and test
"""

import dataclasses
import itertools
import os
import statistics
import time

import keras

import kerasbert
from kerasbert.training.distillation.students import copy_encoder_weights
from kerasbert.training.distillation.task import TaskDistiller
from kerasbert.training.glue_metrics import is_degenerate
from tests.proofs import gloss

TEACHER_EXAMPLES, STUDENT_EXAMPLES = 8000, 4000
STUDENT_EPOCHS, LEARNING_RATE = 4, 1e-3


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What `select` chooses: the teacher's fine-tuning epochs and the distillation loss's
    temperature and soft-target weight."""

    teacher_epochs: int
    temperature: float
    alpha: float

    def __str__(self):
        return (f"teacher epochs {self.teacher_epochs}, temperature {self.temperature:g}, "
                f"alpha {self.alpha:g}")


GRID = tuple(Recipe(epochs, temperature, alpha) for epochs, temperature, alpha in
             itertools.product((2, 3), (1.0, 2.0, 4.0), (0.5, 0.9)))
SELECTION_SEEDS = (0,)
RECIPE = Recipe(teacher_epochs=2, temperature=2.0, alpha=0.9)
MEASURED_SEEDS = tuple(range(4))


@dataclasses.dataclass
class Outcome:
    """One seed of one recipe: {split: accuracy} of each arm, and the arms whose predictions
    on some split were all one label (a degenerate run)."""

    teacher: dict
    student_alone: dict
    student_distilled: dict
    degenerate: list

    def share_gain(self, split):
        """The taught student's share of the teacher's accuracy minus the lone student's."""
        return ((self.student_distilled[split] - self.student_alone[split])
                / self.teacher[split])


def _teacher(pretrained, seed):
    """4 layers: the pretrained embeddings, 2 layers and pooler, then 2 new layers."""
    config = pretrained.encoder.config
    keras.utils.set_random_seed(seed)
    encoder = kerasbert.models.build_encoder(config.replace(num_layers=4))
    new_layers = [layer.get_weights() for layer in encoder.transformer_layers[2:]]
    copy_encoder_weights(pretrained.encoder, encoder, layer_map=(0, 1, 0, 1))
    for layer, weights in zip(encoder.transformer_layers[2:], new_layers):
        layer.set_weights(weights)
    return kerasbert.models.build_task_model(encoder, "sequence_classification",
                                             num_labels=len(gloss.labels()),
                                             id2label=gloss.labels())


def _copy(model):
    """A copy of `model` with its weights and its dropout seed states (the same dropout masks
    step for step)."""
    copy = keras.layers.deserialize(keras.layers.serialize(model))
    for theirs, ours in zip(model.variables, copy.variables, strict=True):
        ours.assign(theirs)
    return copy


def run(tokenizer, pretrained_file, seed, recipes=(RECIPE,), splits=("dev",)):
    """{recipe: Outcome} of one seed, scored on `splits` ("dev", "test"). The recipes share
    what they can: one teacher per number of teacher epochs, one lone student; each taught
    student starts from the same initial weights, so any recipe's outcome is what a run of it
    alone gives."""
    train = gloss.glosses("train")
    teacher_train = train[:TEACHER_EXAMPLES]
    student_train = train[TEACHER_EXAMPLES:TEACHER_EXAMPLES + STUDENT_EXAMPLES]
    evaluated = {split: gloss.glosses(split) for split in splits}
    pretrained = keras.saving.load_model(pretrained_file)

    def scores(name, model, degenerate):
        result = {}
        for split, examples in evaluated.items():
            predicted = gloss.predictions(model, examples, tokenizer)
            if is_degenerate(predicted):
                degenerate.append(f"{name} on {split}")
            result[split] = gloss.accuracy(predicted, examples)
        return result

    teachers, teacher_scores, teacher_degenerate = {}, {}, {}
    for epochs in sorted({recipe.teacher_epochs for recipe in recipes}):
        teachers[epochs] = _teacher(pretrained, seed)
        assert teachers[epochs].encoder.config.num_layers == 4
        gloss.train(teachers[epochs], teacher_train, epochs, LEARNING_RATE, tokenizer, seed)
        teacher_degenerate[epochs] = []
        teacher_scores[epochs] = scores(f"teacher ({epochs} epochs)", teachers[epochs],
                                        teacher_degenerate[epochs])
    keras.utils.set_random_seed(seed + 1)
    student = kerasbert.models.build_task_model(pretrained.encoder.config,
                                                "sequence_classification",
                                                num_labels=len(gloss.labels()),
                                                id2label=gloss.labels())
    alone = _copy(student)
    gloss.train(alone, student_train, STUDENT_EPOCHS, LEARNING_RATE, tokenizer, seed)
    alone_degenerate = []
    alone_scores = scores("student alone", alone, alone_degenerate)
    outcomes = {}
    for recipe in recipes:
        taught = _copy(student)
        gloss.train(TaskDistiller(teachers[recipe.teacher_epochs], taught,
                                  temperature=recipe.temperature, alpha=recipe.alpha),
                    student_train, STUDENT_EPOCHS, LEARNING_RATE, tokenizer, seed)
        degenerate = teacher_degenerate[recipe.teacher_epochs] + alone_degenerate
        outcomes[recipe] = Outcome(teacher_scores[recipe.teacher_epochs], alone_scores,
                                   scores(f"student taught ({recipe})", taught, degenerate),
                                   degenerate)
    return outcomes


def chosen(outcomes):
    """The selection rule: the recipe whose taught student has the highest mean dev accuracy
    over the seeds of `outcomes` ({seed: {recipe: Outcome}})."""
    recipes = next(iter(outcomes.values()))
    return max(recipes, key=lambda recipe: statistics.mean(
        by_recipe[recipe].student_distilled["dev"] for by_recipe in outcomes.values()))


def _settings(recipes, splits, tiny_bert):
    """What a kept result depends on (`gloss.kept`)."""
    return {"recipes": [dataclasses.asdict(recipe) for recipe in recipes], "splits": list(splits),
            "examples": [TEACHER_EXAMPLES, STUDENT_EXAMPLES], "student_epochs": STUDENT_EPOCHS,
            "learning_rate": LEARNING_RATE, "tiny_bert": str(tiny_bert), **gloss.RUN_SETTINGS,
            "tiny_bert_bytes": os.path.getsize(tiny_bert)}


def _kept_run(arguments, seed, recipes, splits, name):
    """`run`, kept in `--results_dir` (a later call with the same settings reads it back)."""
    recipes = tuple(recipes)
    result = gloss.kept(
        arguments.results_dir / f"distillation-{name}-seed{seed}.json",
        _settings(recipes, splits, arguments.tiny_bert),
        lambda: [dataclasses.asdict(outcome) for outcome in run(
            arguments.tokenizer, arguments.tiny_bert, seed, recipes, splits).values()])
    return {recipe: Outcome(**outcome) for recipe, outcome in zip(recipes, result)}


def _select(arguments):
    seeds = arguments.seeds or SELECTION_SEEDS
    outcomes = {}
    for seed in seeds:
        start = time.time()
        outcomes[seed] = _kept_run(arguments, seed, GRID, ("dev",), "select")
        print(f"seed {seed}: {len(GRID)} recipes in {time.time() - start:.0f} s; dev accuracy "
              f"of the taught student: " + ", ".join(
                  f"[{recipe}] {outcome.student_distilled['dev']:.4f}"
                  for recipe, outcome in outcomes[seed].items()), flush=True)
    rows = []
    for recipe in GRID:
        seen = [outcomes[seed][recipe] for seed in seeds]
        rows.append([str(recipe.teacher_epochs), f"{recipe.temperature:g}", f"{recipe.alpha:g}",
                     " / ".join(f"{outcome.teacher['dev']:.3f}" for outcome in seen),
                     " / ".join(f"{outcome.student_alone['dev']:.3f}" for outcome in seen),
                     " / ".join(f"{outcome.student_distilled['dev']:.3f}" for outcome in seen),
                     f"{statistics.mean(o.student_distilled['dev'] for o in seen):.4f}",
                     " / ".join(f"{100 * outcome.share_gain('dev'):+.1f}" for outcome in seen)])
        if any(outcome.degenerate for outcome in seen):
            rows[-1][-1] += " (degenerate: " + "; ".join(
                sorted({name for outcome in seen for name in outcome.degenerate})) + ")"
    seed_names = "/".join(map(str, seeds))
    print(f"Dev accuracy (whole dev split) for seeds {seed_names}:")
    print(gloss.table(["teacher epochs", "temperature", "alpha", "teacher",
                       "student alone", "student taught", "taught mean",
                       "share gain (points)"], rows, arguments.markdown))
    choice = chosen(outcomes)
    print(f"chosen (highest mean dev accuracy of the taught student): {choice}"
          + ("" if choice == RECIPE else f"; RECIPE in tests/proofs/distillation.py is {RECIPE}"))


def _measure(arguments):
    seeds = arguments.seeds or MEASURED_SEEDS
    print(f"recipe: {RECIPE}")
    rows, seen = [], {}
    for seed in seeds:
        start = time.time()
        seen[seed] = outcome = _kept_run(arguments, seed, (RECIPE,), gloss.EVAL_SPLITS,
                                         "measure")[RECIPE]
        print(f"seed {seed} in {time.time() - start:.0f} s: " + "; ".join(
            f"{split} teacher {outcome.teacher[split]:.4f}, student alone "
            f"{outcome.student_alone[split]:.4f}, taught {outcome.student_distilled[split]:.4f}"
            for split in gloss.EVAL_SPLITS)
              + (f"; degenerate: {outcome.degenerate}" if outcome.degenerate else ""),
              flush=True)
        for split in gloss.EVAL_SPLITS:
            teacher = outcome.teacher[split]
            rows.append([str(seed), split, f"{teacher:.3f}",
                         f"{outcome.student_alone[split]:.3f}",
                         f"{outcome.student_distilled[split]:.3f}",
                         f"{100 * outcome.student_alone[split] / teacher:.1f}%",
                         f"{100 * outcome.student_distilled[split] / teacher:.1f}%",
                         f"{100 * outcome.share_gain(split):+.1f}"])
    print(gloss.table(["seed", "split", "teacher", "student alone", "student taught",
                       "share alone", "share taught", "share gain (points)"], rows,
                      arguments.markdown))
    for split in gloss.EVAL_SPLITS:
        outcomes = seen.values()
        print(f"{split}: teacher {gloss.span([o.teacher[split] for o in outcomes])}; "
              f"student alone {gloss.span([o.student_alone[split] for o in outcomes])}; "
              f"taught {gloss.span([o.student_distilled[split] for o in outcomes])}; "
              f"teacher - student alone "
              f"{gloss.span([o.teacher[split] - o.student_alone[split] for o in outcomes])}; "
              f"share gain (points) "
              f"{gloss.span([100 * o.share_gain(split) for o in outcomes], 1)}")


if __name__ == "__main__":
    arguments = gloss.script_arguments(__doc__.split("\n\n")[0], ("select", "measure"))
    {"select": _select, "measure": _measure}[arguments.mode](arguments)
