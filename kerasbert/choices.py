"""The names users choose among in flags and library arguments (corpus formats, objectives,
strategies, export formats, ...), in a module that imports nothing: a binary lists them in its
`--help` without loading TensorFlow, and the library modules that act on them import them from
here."""

# kerasbert.data.corpus
CORPUS_FORMATS = ("documents", "paragraphs")
BAD_LINE_POLICIES = ("skip", "fail")
# kerasbert.data.instances
OBJECTIVES = ("nsp", "sop", "full_sentences", "doc_sentences", "electra")
# kerasbert.training.distribute
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
# kerasbert.convert.conversions
CONVERT_SOURCE_FORMATS = ("google", "hf", "keras_hub", "keras")
CONVERT_TARGET_FORMATS = ("hf", "keras")
# kerasbert.models.features
FEATURE_COMBINATIONS = ("concat", "sum", "mean")
WORD_POOLINGS = ("first", "mean")
# kerasbert.export
EXPORT_FORMATS = ("saved_model", "tflite", "onnx")
QUANTIZATIONS = ("none", "float16", "dynamic_int8", "int8")
PREDICT_RUNTIMES = ("tflite", "saved_model")
# The keys of tables of implementations (kerasbert.tokenizers.vocabulary_training.TRAINERS,
# kerasbert.training.finetuning_tasks.FINETUNING_TASKS); tests/test_choices.py holds them equal.
VOCABULARY_KINDS = ("byte_pair", "sentence_piece", "wordpiece")
FINETUNING_TASK_NAMES = ("cola", "conll2003", "mnli", "mrpc", "qnli", "qqp", "rte", "squad_v1",
                         "squad_v2", "sst2", "stsb", "swag", "text_embedding", "wnli",
                         "wordnet_gloss")

# sentence-transformers' pooling modes, in the order its `Pooling` module concatenates them
# (`kerasbert.layers.SentencePooling`, `kerasbert-finetune --pooling`).
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
