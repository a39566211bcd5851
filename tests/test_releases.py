"""The supported transformers releases are the tested ones, and every private name of another library that the
package uses is in `releases_hf_roformer`, where each says which releases it serves; the hooks it lists exist in the
installed release."""

import ast
import configparser
import importlib
import re
from pathlib import Path

import pytest
import transformers

from hf_roformer.remote_code import releases_hf_roformer
from hf_roformer.remote_code.releases_hf_roformer import OVERRIDDEN_HOOKS, TRANSFORMERS_RELEASE, release


pytestmark = pytest.mark.releases("remote_code.releases_hf_roformer")  # see setup.cfg


ROOT = Path(__file__).resolve().parent.parent
RELEASES_MODULE = ROOT / "hf_roformer" / "remote_code" / "releases_hf_roformer.py"
# Underscore names of other libraries that stay where transformers' own model code has them (see the module's
# docstring): the attention backend of a config; and two of the standard library's: argparse's list of a parser's
# options, a named tuple's documented `_replace`.
TEMPLATE_NAMES = {"_attn_implementation", "_actions", "_replace"}


def makefile_value(name: str) -> str:
    match = re.search(rf"^{name} \?= (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, name
    return match.group(1).strip()


def setup_requirement(package: str) -> str:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    lines = [line.strip() for line in parser["options"]["install_requires"].splitlines() if line.strip()]
    return next(line for line in lines if re.match(rf"{package}\b", line))


def test_the_supported_range_is_the_tested_range():
    """setup.cfg admits exactly what CI tests: its lower bound is the oldest release `make test-oldest` pins, and
    `make test` resolves the same range at run time (the newest release, never a pin)."""
    requirement = setup_requirement("transformers")
    assert makefile_value("TRANSFORMERS_SPEC") == requirement
    oldest = makefile_value("OLDEST_TRANSFORMERS_SPEC")
    assert oldest.startswith("transformers==")
    assert f">={oldest.removeprefix('transformers==').removesuffix('.0')}," in requirement
    assert release(transformers.__version__) >= release(oldest.removeprefix("transformers=="))


def test_ci_runs_the_readme_test_command_and_prints_the_releases():
    """.ci/run makes the three environments, then runs the README's `make test`, the oldest release's suite and the
    serving suite, each as a timed step."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^for environment in environment environment-oldest environment-serving; do$", ci, re.MULTILINE)
    steps = re.findall(r"^step (\S+) make (\S+) \|\| status=1$", ci, re.MULTILINE)
    assert steps == [("test", "test"), ("test-oldest", "test-oldest"), ("test-serving", "test-serving")]
    assert "testing on transformers {transformers.__version__}" in (ROOT / "Makefile").read_text()


# --- the oldest release's suite: the tests marked `releases` -------------------------------------------------------

# Modules whose behaviour depends on the transformers release through public names whose meaning moved within 5.x
# (besides those that import `releases_hf_roformer` or override one of its `OVERRIDDEN_HOOKS`, found by reading the
# code): each needs a test marked `releases` naming it.
RELEASE_SENSITIVE_AREAS = {
    "auto_registration": "the Auto classes' registration",
    "remote_code.modeling_hf_roformer": "the attention interface and the backends' signatures",
    "remote_code.rotary_hf_roformer": "transformers' rope initialization functions",
    "training.run.training_run": "the Trainer's construction, callbacks and resume",
    "training.run.checkpoints": "the files of the Trainer's checkpoints",
}


def release_dependent_modules() -> dict[str, str]:
    """Module (dotted, under `hf_roformer.`) -> why it depends on the release: it imports `releases_hf_roformer`,
    defines an override of one of `OVERRIDDEN_HOOKS`, or is one of `RELEASE_SENSITIVE_AREAS`."""
    hooks = {hook for _, _, hook in OVERRIDDEN_HOOKS}
    found = {"remote_code.releases_hf_roformer": "the inventory of release differences", **RELEASE_SENSITIVE_AREAS}
    for path in package_sources("hf_roformer"):
        name = ".".join(path.relative_to(ROOT / "hf_roformer").with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("releases_hf_roformer"):
                found.setdefault(name, "imports releases_hf_roformer")
            elif isinstance(node, ast.FunctionDef) and node.name in hooks:
                found.setdefault(name, f"overrides {node.name}")
    return found


def modules_named_by_releases_marks() -> dict[str, list[str]]:
    """Module -> the test files whose `pytest.mark.releases(...)` names it."""
    named: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "releases"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "mark"
            ):
                for argument in node.args:
                    named.setdefault(argument.value, []).append(path.name)
    return named


def test_every_module_that_depends_on_the_release_has_a_test_on_the_oldest_release():
    """`make test-oldest` runs the tests marked `releases` on the oldest supported transformers: every module that
    depends on the release is named by such a mark, and every name a mark gives is a module of the package."""
    dependent = release_dependent_modules()
    named = modules_named_by_releases_marks()
    untested = {module: why for module, why in dependent.items() if module not in named}
    assert not untested, f"no test marked @pytest.mark.releases(...) names these modules: {untested}"
    unknown = {module: files for module, files in named.items() if module not in dependent}
    assert not unknown, f"marked as release-dependent but not found so: {unknown}"


@pytest.mark.parametrize("module, owner, hook", OVERRIDDEN_HOOKS)
def test_every_overridden_hook_exists_in_the_installed_release(module, owner, hook):
    assert callable(getattr(getattr(importlib.import_module(module), owner), hook, None)), (
        f"transformers {transformers.__version__} has no {owner}.{hook}: update releases_hf_roformer and its caller"
    )


def test_the_cache_name_follows_the_installed_release():
    expected = "cache" if TRANSFORMERS_RELEASE >= (5, 24) else "past_key_values"
    assert releases_hf_roformer.CACHE_FIELD == expected
    assert expected in transformers.modeling_outputs.CausalLMOutputWithCrossAttentions.__dataclass_fields__


def package_sources(*folders: str) -> list[Path]:
    """The package's source files (the shipped checkpoints' links to `remote_code/` are not sources of their own)."""
    folders = folders or ("hf_roformer", "hf_roformer_cli")
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py") if not path.is_symlink())


def names_the_package_defines(sources: list[Path]) -> set[str]:
    """Every underscore name the package gives something itself: functions, classes, attributes it assigns,
    keyword arguments it passes (`set_defaults(_run=...)`), class attributes."""
    names = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)
    return {name for name in names if name.startswith("_")}


def calls_super(node: ast.Attribute) -> bool:
    """Whether `node` is `super().name` (an override calling the method it overrides)."""
    value = node.value
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super"


def test_private_names_of_other_libraries_are_used_only_in_the_releases_module():
    """An attribute `x._name` read anywhere in the package names either something the package defines itself or one
    of the few template names; other libraries' private names appear in `releases_hf_roformer` only."""
    sources = package_sources()
    own = names_the_package_defines(sources)
    hooks = {hook for _, _, hook in OVERRIDDEN_HOOKS}
    found = []
    for path in sources:
        if path == RELEASES_MODULE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found += [f"{path.relative_to(ROOT)}: import {a.name}" for a in node.names if a.name.startswith("_")]
                continue
            if name is None or not name.startswith("_") or name.startswith("__"):
                continue
            if name in TEMPLATE_NAMES or (name in own and name not in hooks):
                continue
            if name in hooks and isinstance(node.ctx, ast.Load) and not calls_super(node):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: calls the hook {name}")
            elif name not in own:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert not found, found


def test_the_releases_module_travels_with_checkpoints(tmp_path):
    """It is Hub-bound: a saved model's remote code imports it."""
    from conftest import tiny_config

    import hf_roformer

    hf_roformer.HfRoFormerModel(tiny_config()).save_pretrained(tmp_path)
    assert (tmp_path / "releases_hf_roformer.py").read_text() == RELEASES_MODULE.read_text()
