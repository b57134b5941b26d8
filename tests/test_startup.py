"""What starting kerasbert costs: `import kerasbert` loads no export or plotting stack, and no
TensorFlow; every console script answers `--help` from its flags alone (status 0, every flag
named) without importing TensorFlow; `kerasbert-distill --task` starts kerasbert-finetune
without putting the working folder on `sys.path`. How long each takes is measured by
benchmarks/startup.py, not asserted here."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPORT_AND_PLOTTING = ("onnx", "tf2onnx", "onnxruntime", "ai_edge_litert", "matplotlib")
CONSOLE_SCRIPTS = dict(re.findall(r'"(kerasbert-[a-z-]+)=(kerasbert\.cli\.[a-z_]+):run"',
                                  (ROOT / "setup.py").read_text()))


def _python(code, **options):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, **options)
    return json.loads(result.stdout.splitlines()[-1])


def test_import_kerasbert_loads_neither_tensorflow_nor_the_export_and_plotting_stacks():
    loaded = _python(
        "import json, sys, kerasbert\n"
        f"print(json.dumps([name for name in {('tensorflow', *EXPORT_AND_PLOTTING)!r} "
        "if name in sys.modules]))")
    assert loaded == []


@pytest.mark.slow
def test_the_public_api_works_without_loading_the_export_stack():
    """Models, presets, conversion and tokenizers load TensorFlow and Keras (Keras itself
    imports matplotlib when it is installed), never onnx, tf2onnx, ONNX Runtime or LiteRT;
    `kerasbert.export`'s names load them when used."""
    code = (
        "import json, sys, kerasbert\n"
        "config = kerasbert.zoo.get_config('bert_tiny_uncased', num_layers=1, hidden_size=32, "
        "num_heads=2, intermediate_size=64)\n"
        "assert isinstance(config, kerasbert.EncoderConfig)\n"
        "assert 'bert_base_uncased' in kerasbert.zoo.list_presets()\n"
        "kerasbert.models.build_encoder(config)\n"
        "names = [kerasbert.convert.from_hf, kerasbert.convert.to_hf, kerasbert.tokenizers.from_hf,"
        " kerasbert.data.MaskedLmMasker, kerasbert.training.create_optimizer, kerasbert.layers,"
        " kerasbert.export.ExportError, kerasbert.export.FORMATS, kerasbert.export.QUANTIZATIONS]\n"
        "assert all(callable(name) for name in names[:5])\n"
        "before = [name for name in ('onnx', 'tf2onnx', 'onnxruntime', 'ai_edge_litert') "
        "if name in sys.modules]\n"
        "kerasbert.export.export\n"
        "print(json.dumps([before, kerasbert.export.FORMATS, 'tf2onnx' in sys.modules]))")
    before, formats, tf2onnx_after = _python(code)
    assert before == []
    assert formats == ["saved_model", "tflite", "onnx"] and tf2onnx_after


def test_an_unknown_attribute_is_an_attribute_error():
    code = ("import json, kerasbert\n"
            "try:\n    kerasbert.no_such_name\nexcept AttributeError as error:\n"
            "    print(json.dumps(str(error)))")
    assert _python(code) == "module 'kerasbert' has no attribute 'no_such_name'"


def _console_script(name):
    path = Path(sys.executable).parent / name
    assert path.is_file(), f"{name} is not installed beside {sys.executable} (pip install -e .)"
    return str(path)


def _flags_and_modules(module):
    """The flags the binary's module defines (its own and the shared ones; absl's left out) and
    whether importing it imported TensorFlow."""
    code = (f"import json, sys\nsys.argv = ['kerasbert-x']\nimport {module}\n"
            "from absl import flags\n"
            "names = sorted(flag.name for name, defined in flags.FLAGS.flags_by_module_dict()."
            "items() if not name.startswith('absl.') for flag in defined)\n"
            "print(json.dumps([names, 'tensorflow' in sys.modules]))")
    return _python(code)


@pytest.mark.parametrize("binary", sorted(CONSOLE_SCRIPTS))
def test_help_names_every_flag_and_defining_them_imports_no_tensorflow(binary):
    names, tensorflow_imported = _flags_and_modules(CONSOLE_SCRIPTS[binary])
    assert not tensorflow_imported
    result = subprocess.run([_console_script(binary), "--help"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(f"`{binary}`"), result.stdout[:300]
    missing = [name for name in names
               if not re.search(rf"--(\[no\])?{name}\b", result.stdout)]
    assert names and not missing, missing


@pytest.mark.slow
def test_distill_task_runs_do_not_import_modules_from_the_working_folder(tmp_path):
    """`kerasbert-distill --task=T` hands the command line to kerasbert-finetune; a `keras.py`
    in the folder the user runs it from must not be imported in place of Keras."""
    marker = tmp_path / "planted_keras_imported"
    (tmp_path / "keras.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise SystemExit('planted keras.py imported')\n")
    result = subprocess.run([_console_script("kerasbert-distill"), "--task=sst2",
                             f"--model_dir={tmp_path / 'run'}"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert not marker.exists(), result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == (
        "kerasbert-finetune: error: Give --data_dir or --train_file")
    assert result.returncode == 1
