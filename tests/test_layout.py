"""Where the code lives: the library never imports the command line (every library module imports in a process where
`hf_roformer_cli` cannot be imported), no two modules import each other (directly or round a longer circle), and the
command line parses before importing the library."""

import ast
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hf_roformer", "hf_roformer_cli")

WITHOUT_THE_CLI = """
import importlib, importlib.abc, pkgutil, sys

class RefuseTheCli(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "hf_roformer_cli" or name.startswith("hf_roformer_cli."):
            raise ModuleNotFoundError(f"{name}: the library imported the command line")
        return None

sys.meta_path.insert(0, RefuseTheCli())
import hf_roformer
names = sorted(module.name for module in pkgutil.walk_packages(hf_roformer.__path__, "hf_roformer."))
for name in names:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as error:  # a module for a serving engine, which this environment may not have
        if (name, error.name) not in NEEDS_AN_ENGINE:
            raise
print(len(names), "modules")
"""
# Modules that are vLLM models (loaded by vLLM, through the package's plugin) and import vLLM itself: the one
# exception to "every library module imports in the base install".
NEEDS_AN_ENGINE = {("hf_roformer.integrations.vllm_model", "vllm")}
WITHOUT_THE_CLI = f"NEEDS_AN_ENGINE = {NEEDS_AN_ENGINE!r}\n" + WITHOUT_THE_CLI


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The project modules `path` imports (relative imports resolved; `from package import name` counts the
    submodule when `name` is one)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    files = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py") if not path.is_symlink()]
    known = {module_name(path) for path in files}
    return {module_name(path): imported_modules(path, known) for path in files}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, ()):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_library_module_imports_without_the_command_line():
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_CLI], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.split()[0]) > 40


def test_no_library_module_names_the_command_line():
    graph = import_graph()
    library = {name: targets for name, targets in graph.items() if name.split(".")[0] == "hf_roformer"}
    assert {name: sorted(t for t in targets if t.startswith("hf_roformer_cli")) for name, targets in library.items()
            if any(t.startswith("hf_roformer_cli") for t in targets)} == {}  # fmt: skip


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_command_line_imports_the_library_only_inside_its_commands():
    """Module level of the CLI package imports nothing of hf_roformer (nor torch or transformers): parsing is free."""
    for path in (ROOT / "hf_roformer_cli").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        names = [alias.name for node in top_level for alias in node.names] + [
            node.module for node in top_level if isinstance(node, ast.ImportFrom) and node.module
        ]
        heavy = [name for name in names if name.split(".")[0] in ("hf_roformer", "torch", "transformers")]
        assert heavy == [], f"{path.name}: {heavy}"


# -- the code that travels with a checkpoint: one folder, `hf_roformer/remote_code` ----------------------------------

REMOTE_CODE = ROOT / "hf_roformer" / "remote_code"
# What a file there may import at module level besides the standard library and its siblings: transformers and the
# packages transformers itself requires.
REMOTE_CODE_DEPENDENCIES = {"torch", "transformers", "tokenizers", "huggingface_hub"}


def remote_code_files() -> set[str]:
    return {path.name for path in REMOTE_CODE.glob("*.py") if path.name != "__init__.py"}


def top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports run when the module is imported: module level, outside `try:` blocks (optional packages go there)."""
    found = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If):  # e.g. `if TYPE_CHECKING:` or a version test
            found += [child for child in ast.walk(node) if isinstance(child, (ast.Import, ast.ImportFrom))]
    return found


def test_every_file_named_for_checkpoints_lives_in_the_remote_code_folder():
    """(A shipped checkpoint's code files are links to these files, not files of their own.)"""
    named = [path for package in PACKAGES for path in (ROOT / package).rglob("*_hf_roformer.py")]
    outside = [str(path.relative_to(ROOT)) for path in named if path.parent != REMOTE_CODE and not path.is_symlink()]
    assert outside == []
    assert all(name.endswith("_hf_roformer.py") for name in remote_code_files()), sorted(remote_code_files())


def test_remote_code_imports_only_transformers_its_requirements_and_siblings():
    """Flat siblings: `from .name_hf_roformer import X` (one dot, a file of the folder), never the package itself."""
    siblings = {name.removesuffix(".py") for name in remote_code_files()}
    problems = []
    for name in sorted(remote_code_files()):
        tree = ast.parse((REMOTE_CODE / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                if node.level != 1 or node.module not in siblings:
                    problems.append(f"{name}:{node.lineno}: from {'.' * node.level}{node.module or ''} import ...")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module]
                problems += [f"{name}:{node.lineno}: {m}" for m in modules if m.split(".")[0] == "hf_roformer"]
        for node in top_level_imports(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                continue
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module]
            for module in modules:
                root = module.split(".")[0]
                if root not in sys.stdlib_module_names and root not in REMOTE_CODE_DEPENDENCIES:
                    problems.append(f"{name}:{node.lineno}: imports {module} at module level")
    assert problems == []


def test_every_remote_code_file_travels_with_a_saved_model_or_tokenizer(tmp_path):
    """The folder is exactly the closure transformers copies: the files of a model (with each head that has a module
    of its own) and a tokenizer together."""
    from conftest import tiny_config

    import hf_roformer

    hf_roformer.HfRoFormerForMaskedLM(tiny_config()).save_pretrained(tmp_path / "model")
    hf_roformer.HfRoFormerForGlobalPointer(tiny_config()).save_pretrained(tmp_path / "global_pointer")  # its own file
    vocab = ROOT / "tests" / "fixtures" / "char_vocab.txt"
    hf_roformer.HfRoFormerTokenizer(str(vocab)).save_pretrained(tmp_path / "tokenizer")
    copied = {path.name for path in tmp_path.glob("*/*.py")}
    assert copied == remote_code_files()


# -- one forward, followed in three files -----------------------------------------------------------------------------

# The files whose code an inference forward runs: the model, its rotation, and the module of release differences
# (`traces_graph`, the cache's name); the config is read (its `head_dim` property, and its rules' answer to whether
# the frequencies depend on the length).
FORWARD_FILES = {"modeling_hf_roformer.py", "rotary_hf_roformer.py", "releases_hf_roformer.py"}
CONFIG_READS = {"configuration_hf_roformer.py": {"head_dim"}, "config_rules_hf_roformer.py": {"is_length_dependent"}}


def remote_code_calls(call) -> dict[str, set[str]]:
    """The functions of `remote_code` files that `call()` runs, by file (Python's profiler sees every call)."""
    found: dict[str, set[str]] = {}

    def record(frame, event, arg):
        path = Path(frame.f_code.co_filename)
        if event == "call" and path.parent == REMOTE_CODE:
            found.setdefault(path.name, set()).add(frame.f_code.co_name)

    sys.setprofile(record)
    try:
        call()
    finally:
        sys.setprofile(None)
    return found


def test_an_inference_forward_of_every_head_runs_model_code_of_three_files():
    """A reader follows one forward (plain, padded, cached decoding, `generate`, every head) in the model's file, the
    rotation's and the release differences', with the config beside them: what the forward chooses (attention
    function, rotation kernel, joined projections) is decided where it is used, not in the modules of each variant."""
    import torch
    from conftest import tiny_config

    import hf_roformer

    torch.manual_seed(0)
    input_ids = torch.randint(1, 99, (2, 7))
    attention_mask = torch.ones_like(input_ids).index_fill_(1, torch.tensor([5, 6]), 0)
    heads = [
        hf_roformer.HfRoFormerModel,
        hf_roformer.HfRoFormerForMaskedLM,
        hf_roformer.HfRoFormerForSequenceClassification,
        hf_roformer.HfRoFormerForTokenClassification,
        hf_roformer.HfRoFormerForQuestionAnswering,
    ]
    forwards = {}
    for head in heads:
        model = head(tiny_config()).eval()
        forwards[head.__name__] = lambda model=model: model(input_ids, attention_mask=attention_mask)
        forwards[head.__name__ + " unpadded"] = lambda model=model: model(input_ids)
    choices = hf_roformer.HfRoFormerForMultipleChoice(tiny_config()).eval()
    forwards["HfRoFormerForMultipleChoice"] = lambda: choices(
        torch.stack([input_ids, input_ids.flip(0)], 1), attention_mask=torch.stack([attention_mask] * 2, 1)
    )
    decoder = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True)).eval()
    forwards["HfRoFormerForCausalLM generate"] = lambda: decoder.generate(
        input_ids, attention_mask=attention_mask, max_new_tokens=3, do_sample=False
    )
    for name, forward in forwards.items():
        with torch.no_grad():
            calls = remote_code_calls(forward)
        for file, reads in CONFIG_READS.items():
            unexpected = calls.pop(file, set()) - reads
            assert unexpected == set(), (name, file, unexpected)
        assert set(calls) <= FORWARD_FILES, (name, {file: calls[file] for file in set(calls) - FORWARD_FILES})
        assert {"modeling_hf_roformer.py", "rotary_hf_roformer.py"} <= set(calls), (name, sorted(calls))


# The layers of `remote_code`, lowest first: a file imports only files of lower layers, so the configuration and the
# pieces the model is built from never depend on the model, and the configuration on no part of it.
REMOTE_CODE_LAYERS = (
    # What depends on nothing of the folder: release differences, the config's rules, text rules, kernels, Hub files.
    {
        "releases_hf_roformer",
        "config_rules_hf_roformer",
        "text_rules_hf_roformer",
        "rotary_kernels_hf_roformer",
        "tensor_parallel_hf_roformer",
        "model_card_hf_roformer",
        "sentence_transformers_hf_roformer",
    },
    # The configuration, and the parts of the model and tokenizer, each on its own.
    {
        "configuration_hf_roformer",
        "rotary_hf_roformer",
        "blockwise_attention_hf_roformer",
        "linear_attention_hf_roformer",
        "joined_projection_hf_roformer",
        "saving_hf_roformer",
        "encoding_hf_roformer",
    },
    {"modeling_hf_roformer", "tokenization_hf_roformer"},
    {"global_pointer_hf_roformer"},  # a head with a module of its own, on top of the model
)
MODEL_PARTS = REMOTE_CODE_LAYERS[1] - {"configuration_hf_roformer"} | REMOTE_CODE_LAYERS[2] | REMOTE_CODE_LAYERS[3]


def sibling_imports(name: str) -> set[str]:
    """The sibling modules a `remote_code` file imports (`from .name import ...`), wherever in the file."""
    tree = ast.parse((REMOTE_CODE / f"{name}.py").read_text(encoding="utf-8"))
    return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1}


def test_remote_code_files_import_only_lower_layers():
    layer_of = {name: index for index, layer in enumerate(REMOTE_CODE_LAYERS) for name in layer}
    assert set(layer_of) == {name.removesuffix(".py") for name in remote_code_files()}, "a file without a layer"
    upward = [
        f"{name} (layer {layer_of[name]}) imports {imported} (layer {layer_of[imported]})"
        for name in sorted(layer_of)
        for imported in sorted(sibling_imports(name))
        if layer_of[imported] >= layer_of[name]
    ]
    assert upward == []
    assert sibling_imports("configuration_hf_roformer") & MODEL_PARTS == set()
