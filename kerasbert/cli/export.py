"""`kerasbert-export`: SavedModel, TFLite and ONNX artifacts of a model, each verified.

    kerasbert-export --model=runs/mrpc/model.keras --output_dir=exports/mrpc \\
        --formats=saved_model,tflite,onnx --quantize=none,float16,dynamic_int8,int8 \\
        --calibration_data=corpus/dev.txt --text_signatures --tokenizer=hf/bert-base-uncased \
        --eval_file=glue/MRPC/dev.tsv --task=mrpc

`--model` takes a `.keras` file, a `kerasbert-pretrain` or `kerasbert-finetune` directory or a
local Hugging Face folder. Every artifact is reloaded in a fresh process and compared with the
Keras model before anything appears at `--output_dir`; `export_report.json` says what was
checked. `model.onnx` is ONNX Runtime's fused graph when that verifies (the report's
`onnx_runtime_fusion` says which, or why not); `--quantize=dynamic_int8` with onnx also writes
`model_dynamic_int8.onnx`. A quantized variant passes with argmax agreement >= 0.99 on judging texts that did not
calibrate it or, given `--eval_file` and `--task`, with its task metric within 1 point of the
Keras model's on that file. Errors, a refused artifact among them, are reported in one line and
the exit status is 1.
"""

from absl import app, flags, logging

from kerasbert.choices import EXPORT_FORMATS as FORMATS
from kerasbert.choices import QUANTIZATIONS
from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS

flags.DEFINE_string("model", None, "A .keras file, a kerasbert-pretrain or kerasbert-finetune "
                    "directory, or a local Hugging Face folder.", required=True)
flags.DEFINE_string("output_dir", None, "Where the artifacts go; must not exist yet (or be "
                    "empty).", required=True)
flags.DEFINE_list("formats", list(FORMATS), f"Any of {', '.join(FORMATS)}.")
flags.DEFINE_list("quantize", ["none"], f"TFLite variants, any of {', '.join(QUANTIZATIONS)} "
                  "(int8: full integer, needs --calibration_data); dynamic_int8 also writes "
                  "model_dynamic_int8.onnx when onnx is among --formats.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the text signatures and of "
                     "the verification and calibration inputs (default: a kerasbert-finetune "
                     "folder's recorded one, else 128).", lower_bound=4)
flags.DEFINE_boolean("text_signatures", False, "Add serve_text, serve_text_pair and "
                     "serve_examples to the SavedModel (and the task's answer signature: "
                     "serve_choices, serve_question or serve_entities) and write "
                     "model_text.tflite.")
# How serve_question decodes; a kerasbert-finetune folder's recorded values unless given.
flags.DEFINE_integer("doc_stride", 128, "serve_question: tokens between the starts of two "
                     "windows of a long context.", lower_bound=1)
flags.DEFINE_integer("max_query_length", 64, "serve_question: a question's tokens kept.",
                     lower_bound=1)
flags.DEFINE_integer("max_answer_length", 30, "serve_question: the longest answer, in tokens.",
                     lower_bound=1)
flags.DEFINE_integer("n_best_size", 20, "serve_question: start and end candidates per window.",
                     lower_bound=1)
flags.DEFINE_boolean("version_2_with_negative", False, "serve_question: the model may answer "
                     "that there is no answer (SQuAD v2.0); adds has_answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "serve_question with "
                   "--version_2_with_negative: no answer when the null score exceeds the best "
                   "span's by more than this.")
ANSWER_FLAGS = ("doc_stride", "max_query_length", "max_answer_length", "n_best_size",
                "version_2_with_negative", "null_score_diff_threshold")
flags.DEFINE_string("tokenizer", None, "A Hugging Face tokenizer folder for the text signatures "
                    "and calibration (default: the model's own).")
flags.DEFINE_list("calibration_data", None, "Text files (one text a line, .gz allowed): int8 "
                  "calibrates on the first lines, quantized variants are judged on the lines "
                  "after them (default: the shipped corpus's held-out shard).")
flags.DEFINE_integer("serving_version", None, "Write the SavedModel under saved_model/<N>/, "
                     "TF Serving's layout.", lower_bound=0)
flags.DEFINE_string("eval_file", None, "A labelled file of --task in any format kerasbert-finetune "
                    "reads: quantized variants must keep the task metric within 1 point of the "
                    "Keras model's on it.")
flags.DEFINE_string("task", None, "The kerasbert-finetune task of --eval_file (e.g. mrpc, "
                    "wordnet_gloss, squad_v1, conll2003, swag).")
flags.DEFINE_integer("max_eval_examples", None, "Judge on the first N examples of --eval_file "
                     "only (default: all).", lower_bound=1)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from kerasbert.export.exporter import export
    from kerasbert.export.report import summary_lines

    logging.set_verbosity(logging.WARNING)
    report = export(FLAGS.model, FLAGS.output_dir, formats=FLAGS.formats,
                    quantize=FLAGS.quantize,
                    max_seq_length=(FLAGS.max_seq_length if FLAGS["max_seq_length"].present
                                    else None),
                    text_signatures=FLAGS.text_signatures, tokenizer=FLAGS.tokenizer,
                    calibration_data=FLAGS.calibration_data,
                    serving_version=FLAGS.serving_version, eval_file=FLAGS.eval_file,
                    task=FLAGS.task, max_eval_examples=FLAGS.max_eval_examples,
                    answer_settings={name: FLAGS[name].value for name in ANSWER_FLAGS
                                     if FLAGS[name].present})
    print("\n".join(summary_lines(report, FLAGS.output_dir)))


def run():
    run_reporting_errors(main, "kerasbert-export")


if __name__ == "__main__":
    run()
