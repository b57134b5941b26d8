"""`kerasbert.choices` lists, for binaries' `--help`, the keys of two tables of implementations
that import TensorFlow; they must stay the same names."""

from kerasbert import choices
from kerasbert.tokenizers.vocabulary_training import TRAINERS
from kerasbert.training.finetuning_tasks import FINETUNING_TASKS


def test_vocabulary_kinds_are_the_trainers():
    assert choices.VOCABULARY_KINDS == tuple(sorted(TRAINERS))


def test_finetuning_task_names_are_the_tasks():
    assert choices.FINETUNING_TASK_NAMES == tuple(sorted(FINETUNING_TASKS))
