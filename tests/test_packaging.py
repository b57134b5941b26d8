"""The wheel installs `zoo/` and `export/` as `kerasbert.zoo` / `kerasbert.export`, and nothing at top level."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True)
    (path,) = out.glob("kerasbert-*.whl")
    return path


def test_wheel_layout(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"kerasbert"}
    for module in ("kerasbert/zoo/__init__.py", "kerasbert/zoo/presets.py",
                   "kerasbert/export/__init__.py", "kerasbert/convert/from_hf.py",
                   "kerasbert/data/demo/wordnet_gloss-train.tsv.gz",
                   "kerasbert/data/demo/pydocs-00000-of-00004.txt.gz",
                   "kerasbert/data/demo/LICENSE.PSF.txt",
                   "kerasbert/data/demo/vocab/wordpiece/vocab.txt",
                   "kerasbert/data/demo/vocab/sentence_piece/spiece.model",
                   "kerasbert/data/demo/vocab/byte_pair/merges.txt"):
        assert module in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "kerasbert-demo = kerasbert.cli.demo:run" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.mark.slow
def test_installed_wheel_imports_from_site_packages(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True)
    code = ("import kerasbert, kerasbert.zoo, kerasbert.export; "
            "print(kerasbert.zoo.__file__); print(kerasbert.zoo.list_presets()[0])")
    env = dict(os.environ, PYTHONPATH=str(target), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, check=True,
                            capture_output=True, text=True)
    zoo_file, first_preset = result.stdout.split()
    assert zoo_file.startswith(str(target)) and first_preset == "albert_base_v2"


@pytest.mark.slow
def test_editable_install_resolves_mapped_packages():
    """The development install (pip install -e .) maps kerasbert.zoo to the top-level zoo/."""
    code = "import kerasbert.zoo, kerasbert.export; print(kerasbert.zoo.__file__, kerasbert.export.__file__)"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd="/", check=True,
                            capture_output=True, text=True)
    zoo_file, export_file = result.stdout.split()
    assert Path(zoo_file) == ROOT / "zoo" / "__init__.py"
    assert Path(export_file) == ROOT / "export" / "__init__.py"


def _setup_requirements():
    """Every requirement setup.py declares (runtime and extras), as `packaging` requirements."""
    import ast

    from packaging.requirements import Requirement

    call = next(node for node in ast.walk(ast.parse((ROOT / "setup.py").read_text()))
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setup")
    keywords = {keyword.arg: keyword.value for keyword in call.keywords}
    runtime = ast.literal_eval(keywords["install_requires"])
    extras = ast.literal_eval(keywords["extras_require"])
    return [Requirement(text) for text in runtime + [text for group in extras.values()
                                                      for text in group]]


def _locked_versions():
    """`{canonical name: version}` of constraints.txt's `name==version` pins."""
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==")
            assert canonicalize_name(name) not in pins, f"{name} is pinned twice"
            pins[canonicalize_name(name)] = version
    return pins


def test_every_requirement_is_locked_inside_its_range():
    from packaging.utils import canonicalize_name

    pins = _locked_versions()
    requirements = _setup_requirements()
    assert len(requirements) > 20
    unpinned = [str(requirement) for requirement in requirements
                if canonicalize_name(requirement.name) not in pins]
    outside = [f"{requirement} (locked {pins[canonicalize_name(requirement.name)]})"
               for requirement in requirements
               if canonicalize_name(requirement.name) in pins
               and not requirement.specifier.contains(pins[canonicalize_name(requirement.name)],
                                                      prereleases=True)]
    assert not unpinned and not outside, (unpinned, outside)


def test_every_requirement_has_an_upper_bound():
    """A new major version of a dependency does not reach users untested."""
    unbounded = [str(requirement) for requirement in _setup_requirements()
                 if not any(spec.operator in ("<", "<=", "==", "~=")
                            for spec in requirement.specifier)]
    assert not unbounded


def _kerasbert_imports(path):
    """The `kerasbert.*` modules a source file imports (at any depth of its code)."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.startswith("kerasbert.")}


def test_conversion_code_imports_no_training_code():
    """`kerasbert.convert` sits below `kerasbert.training` (which starts models from converted
    checkpoints): an import the other way made a cycle through `from_hf`."""
    package = Path(__file__).resolve().parents[1] / "kerasbert" / "convert"
    upward = {path.name: sorted(name for name in _kerasbert_imports(path)
                                if name.startswith("kerasbert.training"))
              for path in sorted(package.glob("*.py"))}
    assert not {name: found for name, found in upward.items() if found}
