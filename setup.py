"""Packaging for kerasbert.

`zoo/` and `export/` live at the top of the repository and install as the
subpackages `kerasbert.zoo` and `kerasbert.export`.
"""

import re

from setuptools import find_packages, setup

VERSION = re.search(r'^__version__ = "([^"]+)"', open("kerasbert/__init__.py", encoding="utf-8").read(),
                    re.MULTILINE).group(1)

LIBRARY_PACKAGES = find_packages(include=["kerasbert", "kerasbert.*"])
MAPPED_PACKAGES = {"kerasbert.zoo": "zoo", "kerasbert.export": "export"}

setup(
    name="kerasbert",
    version=VERSION,
    description="Keras 3 / TensorFlow models, data pipelines, training and export for BERT, "
                "RoBERTa, ALBERT, ELECTRA and DistilBERT.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.13",
    packages=LIBRARY_PACKAGES + list(MAPPED_PACKAGES),
    package_dir={"kerasbert": "kerasbert", **MAPPED_PACKAGES},
    package_data={"kerasbert.data.demo": ["*.gz", "*.txt", "*.md", "vocab/*/*"]},
    # Compatible ranges, each below the dependency's next major version (some tighter, where a
    # minor release is known to change what we use); constraints.txt pins what CI tested.
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorflow-text>=2.21,<2.22",
        "keras>=3.15,<4",
        "keras-hub>=0.32,<0.33",
        "tf2onnx>=1.17,<1.18",
        "onnx>=1.16,<2",
        "onnxruntime>=1.31,<2",
        "absl-py>=2.1,<3",
        "numpy>=1.26,<3",
        "protobuf>=6.31.1,<8",  # google.protobuf (SentencePiece model files); TensorFlow's range
        "safetensors>=0.4,<1",
        "sentencepiece>=0.2,<1",
        "scikit-learn>=1.3,<2",
        "scipy>=1.11,<2",
        "seqeval>=1.2.2,<2",
        "ai-edge-litert>=2.3,<3",
        "matplotlib>=3.8,<4",
    ],
    extras_require={
        "test": [
            "pytest>=8,<10",
            "pytest-xdist>=3.6,<4",
            "filelock>=3.12,<5",  # tests share one build of slow fixtures between workers
            "packaging>=23,<27",  # tests/test_packaging.py reads the requirements
            "torch==2.13.0",
            "transformers>=5.0,<6",
            "tokenizers>=0.22,<1",
            "sentence-transformers>=6.2,<7",  # the reference for text embeddings (issue 40)
            # tests/gcs_emulator.py: a local Google Cloud Storage for TensorFlow's gs:// client
            "gcp-storage-emulator>=2026.7.19,<2027",
        ],
    },
    entry_points={
        "console_scripts": [
            "kerasbert-demo=kerasbert.cli.demo:run",
            "kerasbert-vocab=kerasbert.cli.vocab:run",
            "kerasbert-create-pretraining-data=kerasbert.cli.create_pretraining_data:run",
            "kerasbert-pretrain=kerasbert.cli.pretrain:run",
            "kerasbert-finetune=kerasbert.cli.finetune:run",
            "kerasbert-export=kerasbert.cli.export:run",
            "kerasbert-predict=kerasbert.cli.predict:run",
            "kerasbert-classify=kerasbert.cli.classify:run",
            "kerasbert-convert=kerasbert.cli.convert:run",
            "kerasbert-distill=kerasbert.cli.distill:run",
            "kerasbert-extract-features=kerasbert.cli.extract_features:run",
            "kerasbert-data-service=kerasbert.cli.data_service:run",
        ],
    },
)
