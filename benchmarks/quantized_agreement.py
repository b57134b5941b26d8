"""Quantized TFLite variants against their float models, on real tiny models: the measurements
behind `kerasbert.export`'s acceptance rule (docs/export.md, "Quantized variants: the
measurements").

Models (trained here with the tests' recipes when their files do not exist yet, ~1-3 minutes
each on 2 idle cores):
- the tests' pretrained tiny BERT (`tests/pretrain_tiny_bert.py`: 2 layers, hidden 128, 3,000
  steps of MLM + NSP on the shipped corpus's training shards), as the pretraining model (MLM
  and NSP logits: argmax outputs) and as its encoder (sequence and pooled outputs: vectors);
- a tiny ELECTRA discriminator (tests/training/test_learning.py's recipe: 1,000 steps), whose
  `rtd_logits` (one logit per token) are judged by their signs;
- the two models tests/export/test_quantized_refusal.py breaks on purpose: the near-tie
  classifier and the outlier encoder.

Each is converted by `kerasbert.export.tflite.convert_to_tflite` to float16, dynamic-range int8
and full int8 (calibrated, as `kerasbert-export` does, on single texts of `--calibration_texts`
lines of training shard 1), run by ai-edge-litert on `--texts` lines of the held-out shard 3 as
single texts and on `--texts` pairs of its lines (pretraining models: three masked positions
per row), and compared with the float Keras model by `kerasbert.export.compare.agreement`:
strict argmax agreement (flips / compared) for logits (signs for one logit per token), the
minimum, 1st percentile and mean cosine for vectors. `--ablation` also quantizes back to int8, one group at a time, what full
int8 keeps float (`kerasbert.export.tflite._float_nodes`) and counts the flips of the
pretraining model.

Run from the repository root:

    python benchmarks/quantized_agreement.py                     # ~15 minutes on 2 cores
    python benchmarks/quantized_agreement.py --ablation --texts 1024
    python benchmarks/quantized_agreement.py --smoke     # untrained 2 x 32 BERT, 8 texts: runs?

`--smoke` trains nothing and judges only an untrained tiny BERT pretraining model (2 layers,
hidden 32) and its encoder, on 8 texts (4 calibration texts).
"""

import argparse
import datetime
import gzip
import os
import platform
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")  # as the tests train their models
os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the tests' training recipes and broken models

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402
from tensorflow.lite.python import convert as tflite_convert  # noqa: E402

import kerasbert  # noqa: E402
from kerasbert.data import demo  # noqa: E402
from kerasbert.export import tflite  # noqa: E402
from kerasbert.export.compare import agreement  # noqa: E402
from kerasbert.export.output_kinds import output_kinds  # noqa: E402
from kerasbert.export.signatures import serving_function  # noqa: E402
from kerasbert.models.tasks import encoder_of  # noqa: E402

from reporting import SMOKE_HELP, SMOKE_SHAPE, format_table, smoke_banner  # noqa: E402

VARIANTS = ("float16", "dynamic_int8", "int8")
SEQ_LENGTH, MASKED_POSITIONS = 64, 3
CALIBRATION_SHARD, HELD_OUT_SHARD = 1, 3
# The pretraining model's heads' tensors (the NSP logits are named after the signature output).
HEAD_TENSORS = ("pooler", "mlm_head", "StatefulPartitioned")


def corpus_lines(shard, count):
    with gzip.open(demo.pretraining_corpus_files()[shard], "rt", encoding="utf-8") as file:
        lines = [line.strip() for line in file if line.strip()]
    if len(lines) < count:
        raise SystemExit(f"shard {shard} has {len(lines)} non-empty lines, fewer than {count}")
    return lines[:count]


def packed(tokenizer, texts, pairs=None, positions=False, seed=0):
    inputs = {name: np.asarray(value, np.int32) for name, value in tokenizer(
        texts, pairs, max_length=SEQ_LENGTH, truncation="longest_first").items()}
    if positions:
        rng = np.random.default_rng(seed)
        inputs["masked_lm_positions"] = np.stack([
            np.sort(rng.choice(np.arange(1, max(int(length) - 1, MASKED_POSITIONS + 1)),
                               MASKED_POSITIONS, replace=False))
            for length in inputs["padding_mask"].sum(1)]).astype(np.int32)
    return inputs


def judging_sets(tokenizer, count, positions):
    held_out = corpus_lines(HELD_OUT_SHARD, 3 * count)
    return {"single": packed(tokenizer, held_out[:count], positions=positions),
            "pairs": packed(tokenizer, held_out[count::2], held_out[count + 1::2],
                            positions=positions, seed=1)}


def calibration_inputs(tokenizer, count, positions):
    return [packed(tokenizer, [text], positions=positions, seed=index)
            for index, text in enumerate(corpus_lines(CALIBRATION_SHARD, count))]


def run(flatbuffer, inputs):
    runner = Interpreter(model_content=flatbuffer).get_signature_runner("serving_default")
    return {name: np.asarray(value) for name, value in runner(**inputs).items()}


def describe(result):
    if result["metric"] == "argmax_agreement":
        return f"{result['value']:.4f} ({result['flips']}/{result['compared']} flipped)"
    return (f"min {result['value']:.4f}, p1 {result['percentile_1_cosine']:.4f}, "
            f"mean {result['mean_cosine']:.4f} ({result['compared']})")


def measure(name, model, tokenizer, args, rows):
    """Add `{(model, texts, output): {variant: description}}` entries for `model` to `rows`."""
    serve = serving_function(model)
    positions = "masked_lm_positions" in model.input
    sets = judging_sets(tokenizer, args.texts, positions)
    calibration = calibration_inputs(tokenizer, args.calibration_texts, positions)
    expected = {kind: {key: np.asarray(value) for key, value in serve(inputs).items()}
                for kind, inputs in sets.items()}
    kinds = output_kinds(model)
    for variant in VARIANTS:
        flatbuffer = tflite.convert_to_tflite(serve, model, variant,
                                              calibration if variant == "int8" else None)
        for kind, inputs in sets.items():
            produced = run(flatbuffer, inputs)
            for output in sorted(produced):
                result = agreement(kinds[output], expected[kind][output], produced[output],
                                   inputs["padding_mask"])
                rows.setdefault((name, kind, output), {})[variant] = describe(result)
                print(f"  {name} {variant} {kind} {output}: {describe(result)}", file=sys.stderr,
                      flush=True)
        print(f"  measured {name} {variant}", file=sys.stderr, flush=True)


def ablation(model, tokenizer, args):
    """Flips of the pretraining model's int8 variant with each float group quantized back."""
    serve = serving_function(model)
    sets = judging_sets(tokenizer, args.texts, True)
    expected = {kind: {key: np.asarray(value) for key, value in serve(inputs).items()}
                for kind, inputs in sets.items()}
    kinds = output_kinds(model)
    calibrated = tflite._calibrated(tflite._converter(serve, model),
                                    calibration_inputs(tokenizer, args.calibration_texts, True))
    kept_float = tflite._float_nodes(calibrated)
    operators = _operators(calibrated)

    def named(*parts, kinds=None):
        return {tensor for kind, tensor in operators if all(part in tensor for part in parts)
                and (kinds is None or kind in kinds)} & kept_float

    groups = {
        "none (the export's rule)": set(),
        # The second of each attention's two matmuls (the first, query x key, must stay float).
        "attention probabilities x values": named("attention", "MatMul_1",
                                                  kinds={"BATCH_MATMUL"}),
        "LayerNorms and residual sums": named("layer_norm") | (
            named("transformer_layer_", "/add", kinds={"ADD"}) - named("attention")),
        "embeddings": named("embeddings"),
        "embedding tables (their lookups) only": named("embeddings", kinds={"GATHER"}),
        "heads": {tensor for tensor in kept_float
                  if "transformer_layer_" not in tensor and "embeddings" not in tensor
                  and any(head in tensor for head in HEAD_TENSORS)},
    }
    rows = []
    for group, quantized in groups.items():
        flatbuffer = tflite_convert.mlir_quantize(calibrated,
                                                  denylisted_nodes=sorted(kept_float - quantized))
        cells = []
        for kind, inputs in sets.items():
            produced = run(flatbuffer, inputs)
            for output in ("mlm_logits", "nsp_logits"):
                result = agreement(kinds[output], expected[kind][output], produced[output],
                                   inputs["padding_mask"])
                cells.append(f"{result['flips']}/{result['compared']}")
        rows.append([group, str(len(quantized)), *cells])
        print(f"  ablation: {group}", file=sys.stderr, flush=True)
    return rows


def _operators(flatbuffer):
    from tensorflow.lite.python import schema_py_generated as schema
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    found = []
    for index in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(index)
        for position in range(subgraph.OperatorsLength()):
            operator = subgraph.Operators(position)
            kind = tflite._operator_name(model, operator)[0]
            found += [(kind, subgraph.Tensors(tensor).Name().decode())
                      for tensor in tflite._tensors(operator, "Outputs")]
    return found


def tiny_bert(path):
    if not os.path.exists(path):
        from tests.pretrain_tiny_bert import pretrain_tiny_bert
        print(f"  training the tiny BERT into {path}", file=sys.stderr, flush=True)
        pretrain_tiny_bert(path)
    return keras.saving.load_model(path)


def tiny_electra(path, tokenizer):
    if not os.path.exists(path):
        from kerasbert.models.electra import ElectraPretrainer, generator_config
        from kerasbert.training import create_optimizer
        from tests.helpers import STEPS_PER_EXECUTION, demo_pretraining_dataset, tiny_demo_config
        from tests.training.test_learning import ELECTRA_LEARNING_RATE, ELECTRA_STEPS, SEED

        print(f"  training the tiny ELECTRA into {path}", file=sys.stderr, flush=True)
        keras.utils.set_random_seed(SEED)
        config = tiny_demo_config("electra_small_discriminator", tokenizer, embedding_size=128)
        model = ElectraPretrainer(config, generator_config(config, 0.25), seed=SEED)
        model.compile(optimizer=create_optimizer("adamw", ELECTRA_LEARNING_RATE,
                                                 num_train_steps=ELECTRA_STEPS,
                                                 num_warmup_steps=ELECTRA_STEPS // 10),
                      steps_per_execution=STEPS_PER_EXECUTION)
        model.fit(demo_pretraining_dataset(tokenizer, "electra", held_out=False),
                  steps_per_epoch=ELECTRA_STEPS, epochs=1, verbose=0)
        model.save(path)
    from kerasbert.export.model_sources import load_export_model
    return load_export_model(path)[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=1024,
                        help="held-out single texts, and pairs, each model is judged on")
    parser.add_argument("--calibration_texts", type=int, default=64,
                        help="training-shard texts full int8 calibrates on (the export's 64)")
    parser.add_argument("--bert", default=os.path.join("/tmp", "kerasbert_tiny_bert.keras"),
                        help="the pretrained tiny BERT (.keras), trained there if missing")
    parser.add_argument("--electra", default=os.path.join("/tmp", "kerasbert_tiny_electra.keras"),
                        help="the tiny ELECTRA pretrainer (.keras), trained there if missing")
    parser.add_argument("--ablation", action="store_true",
                        help="also the full-int8 ablation of what stays float")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP + " (module docstring)")
    args = parser.parse_args()

    from tests.export.test_quantized_refusal import near_tie_classifier, rewire_one_unit
    tokenizer = kerasbert.tokenizers.from_hf(demo.vocabulary_dir("wordpiece"))
    if args.smoke:
        print(smoke_banner())
        args.texts, args.calibration_texts = 8, 4
        keras.utils.set_random_seed(0)
        pretraining = kerasbert.models.build_pretraining_model(kerasbert.zoo.get_config(
            "bert_tiny_uncased", vocab_size=tokenizer.vocabulary_size(), max_positions=SEQ_LENGTH,
            **SMOKE_SHAPE))
        models = {"untrained 2 x 32 BERT (MLM + NSP)": pretraining,
                  "untrained 2 x 32 BERT encoder": encoder_of(pretraining)}
    else:
        pretraining = tiny_bert(args.bert)
        models = {"tiny BERT (MLM + NSP)": pretraining,
                  "tiny BERT encoder": encoder_of(pretraining),
                  "tiny ELECTRA discriminator": tiny_electra(args.electra, tokenizer),
                  "near-tie classifier (broken)": near_tie_classifier(tokenizer, SEQ_LENGTH),
                  "outlier encoder (broken)": rewire_one_unit(
                      encoder_of(keras.saving.load_model(args.bert)))}
    rows = {}
    for name, model in models.items():
        measure(name, model, tokenizer, args, rows)

    print(f"{datetime.date.today().isoformat()}, {platform.platform()}; tensorflow "
          f"{tf.__version__}, keras {keras.__version__}, kerasbert {kerasbert.__version__}. "
          f"{args.texts} held-out single texts and {args.texts} pairs (shard {HELD_OUT_SHARD}) at "
          f"sequence length {SEQ_LENGTH}; full int8 calibrated on {args.calibration_texts} texts "
          f"of shard {CALIBRATION_SHARD}.")
    print("Argmax outputs: strict agreement (flipped / compared); vectors: the smallest, 1st "
          "percentile and mean cosine (vectors compared).")
    print(format_table(["model", "texts", "output", *VARIANTS],
                       [[*key, *(cells[variant] for variant in VARIANTS)]
                        for key, cells in rows.items()], args.markdown))
    if args.ablation:
        print("\nFull int8 of the tiny BERT, one float group quantized back to int8 at a time "
              "(flipped / compared):")
        print(format_table(["quantized back to int8", "nodes", "single MLM", "single NSP",
                            "pairs MLM", "pairs NSP"], ablation(pretraining, tokenizer, args),
                           args.markdown))


if __name__ == "__main__":
    main()
