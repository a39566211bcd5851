"""The code that travels with a checkpoint: every file here is copied next to a saved model or tokenizer (transformers
copies the class's module and each sibling it imports), so `AutoModel*.from_pretrained(path, trust_remote_code=True)`
and `AutoTokenizer.from_pretrained(path, trust_remote_code=True)` work where hf_roformer is not installed. Where it is
installed, `import hf_roformer` registers these same classes and they win over the copies.

The boundary, checked by tests/test_layout.py: files here are flat `*_hf_roformer.py` siblings that import only the
standard library, `torch`, `transformers` (with its `tokenizers` and `huggingface_hub`), optional packages inside
`try:` blocks or functions, and each other as `from .module_hf_roformer import Name`; every file is in the copied
closure of a model or a tokenizer; and no file outside this folder is named `*_hf_roformer.py`. This `__init__.py`
is not copied and holds no code.

By job: `configuration` (the config) and `config_rules` (what each field and rope key accepts); `modeling` (one file
in transformers' shape: attention functions, layers, the heads' modules, the base model and the heads the `auto_map`
names, the batch layout, input checks and memory-saving mechanics); `rotary` (frequencies and rotations) and
`rotary_kernels` (the fused kernel); `blockwise_attention` and `linear_attention` (attention variants with their own
math); `joined_projection` (query, key and value as one product, on request); `tensor_parallel`; `saving`
(auto_map, card metadata, files written on save), `model_card` and `sentence_transformers`; `releases` (differences
between library releases, other libraries' private API); `global_pointer` (the GlobalPointer head); the tokenizer's
`tokenization`, `encoding` and `text_rules`.
"""
