"""A pretraining distillation run in a model directory, as `kerasbert-distill` starts it: a
student made from a teacher with an MLM head, trained by a `PretrainingDistiller` on pretraining
batches, resumable, recorded and described like a pretraining run
(`kerasbert.training.pretraining_run`), the student's pretraining model saved at the end as
`<model_dir>/student.keras`.
"""

import dataclasses
from typing import Optional

from kerasbert import file_system
from kerasbert.atomic_files import atomic_path
from kerasbert.training.pretraining_run import RunSettings

STUDENT_FILE = "student.keras"


@dataclasses.dataclass(frozen=True)
class DistillationSettings:
    """A pretraining distillation run: the `teacher` (a path `load_teacher` takes), a student of
    `student_layers` layers (None: half the teacher's, or one per `layer_map` entry) copying the
    teacher layers `layer_map` (None: evenly spaced) with `student_overrides` (`EncoderConfig`
    fields), trained with `PretrainingDistiller`'s `temperature`, `soft_weight`, `mlm_weight`
    and `cosine_weight`, as `run` (a `RunSettings`) says. The run's tokenizer, if any, replaces
    the teacher's; `tokenizer_source` names it in errors.

    >>> from kerasbert.data.pretraining_input import PretrainingInput
    >>> settings = DistillationSettings(RunSettings(
    ...     "runs/distilled", PretrainingInput(text_files=["corpus.txt"]), 10, optimizer={}),
    ...     teacher="runs/bert", student_layers=2)
    >>> settings.temperature, settings.cosine_weight
    (2.0, 1.0)
    """

    run: RunSettings
    teacher: str
    student_layers: Optional[int] = None
    layer_map: Optional[list] = None
    student_overrides: dict = dataclasses.field(default_factory=dict)
    temperature: float = 2.0
    soft_weight: float = 5.0
    mlm_weight: float = 2.0
    cosine_weight: float = 1.0
    tokenizer_source: Optional[str] = None


def run_distillation(settings, program="kerasbert-distill"):
    """Run (or resume) the distillation `settings` (a `DistillationSettings`) describes, printing
    the teacher and the student and the progress; the last logs. A `ValueError` before anything
    is written when the model directory holds a run with other settings, there is no tokenizer
    for text, or the tokenizer does not fit the teacher's vocabulary."""
    from kerasbert.tokenizers.vocabulary_files import load_tokenizer
    from kerasbert.training.distillation.pretraining import PretrainingDistiller
    from kerasbert.training.distillation.students import student_pretraining_model
    from kerasbert.training.distillation.teachers import load_teacher, teacher_tokenizer_arguments
    from kerasbert.training.distribute import strategy_summary
    from kerasbert.training.pretrained_sources import pretraining_description

    run = settings.run
    record = run.run_record(program, STUDENT_FILE)
    strategy = run.start()
    with strategy.scope():
        teacher, tokenizer = load_teacher(settings.teacher)
        tokenizer_source = f"the teacher's tokenizer ({settings.teacher})"
        if run.tokenizer is not None:
            tokenizer = load_tokenizer(**run.tokenizer)
            tokenizer_source = settings.tokenizer_source
        if tokenizer is None and run.input.text_files is not None:
            raise ValueError(f"--text_files needs a tokenizer: the teacher {settings.teacher} "
                             "has none, give --vocab_file or --tokenizer_dir")
        vocab_size = teacher.encoder.config.vocab_size
        if tokenizer is not None and tokenizer.vocabulary_size() != vocab_size:
            raise ValueError(f"Mismatched vocabularies: {tokenizer_source} has "
                             f"{tokenizer.vocabulary_size()} tokens, the teacher's vocab_size "
                             f"is {vocab_size}")
        student = student_pretraining_model(teacher, settings.student_layers, settings.layer_map,
                                            **settings.student_overrides)
        distiller = PretrainingDistiller(
            teacher, student, temperature=settings.temperature,
            soft_weight=settings.soft_weight, mlm_weight=settings.mlm_weight,
            cosine_weight=settings.cosine_weight)
        del teacher  # the distiller holds its own frozen copy
        distiller.compile(optimizer=run.create_optimizer())
    print(f"{strategy_summary(strategy)}; teacher {_describe(distiller.teacher)} -> student "
          f"{_describe(student)}")
    run.begin(record, pretraining_description(
        student.encoder.config, student.heads, None,
        run.recorded_tokenizer() or teacher_tokenizer_arguments(settings.teacher)))
    logs = run.train(distiller, strategy, tokenizer)
    with atomic_path(file_system.join(run.model_dir, STUDENT_FILE)) as temporary:
        student.save(temporary)
    print("\nDone: " + ", ".join(f"{name} {value:.4g}" for name, value in logs.items()))
    return logs


def _describe(model):
    config = model.encoder.config
    return (f"{config.family}, {config.num_layers} layers, hidden {config.hidden_size}, "
            f"vocab {config.vocab_size}, {model.encoder.count_params():,} encoder parameters")
