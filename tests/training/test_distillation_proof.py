"""Proof that task distillation works: a 2-layer student taught by a 4-layer teacher keeps a
clearly larger share of the teacher's accuracy than the same student trained alone.

The set-up, the recipe (`RECIPE`) and how it was chosen are in tests/proofs/distillation.py:
the recipe was chosen on the dev split, by the dev accuracy of the taught student, and this
test checks it on that split, for seed 0. The test split is not used here: it was scored once,
by `python -m tests.proofs.distillation measure`; docs/distillation.md gives
those figures and the dev ones behind the margins below. Were a change to make this test fail,
re-choose the recipe on dev (`... select`), never on the test split. About 100 s on two idle
cores, on top of the session's pretraining.
"""

import pytest

from tests.proofs.distillation import RECIPE, run

pytestmark = pytest.mark.slow

SEED = 0
# The teacher's dev accuracy above the student's alone, and the taught student's share of the
# teacher's above the student's alone: each about half the smallest one seen on dev over the
# measured seeds (docs/distillation.md).
TEACHER_MARGIN = 0.05
SHARE_MARGIN = 0.05


@pytest.fixture(scope="module")
def outcome(demo_tokenizer, pretrained_tiny_bert_file):
    result = run(demo_tokenizer, pretrained_tiny_bert_file, SEED, (RECIPE,), ("dev",))[RECIPE]
    print(f"{RECIPE}, seed {SEED}, dev accuracy: teacher {result.teacher['dev']:.3f}, student "
          f"alone {result.student_alone['dev']:.3f}, taught {result.student_distilled['dev']:.3f}")
    return result


def test_no_model_predicts_one_label_for_everything(outcome):
    assert not outcome.degenerate


def test_the_teacher_is_clearly_better_than_the_student_alone(outcome):
    assert outcome.teacher["dev"] > outcome.student_alone["dev"] + TEACHER_MARGIN


def test_the_distilled_student_keeps_a_clearly_larger_share_of_the_teacher(outcome):
    assert outcome.share_gain("dev") > SHARE_MARGIN
