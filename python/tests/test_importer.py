"""nax.from_torch: a PyTorch module exported with torch.export becomes nax
source with named axes (dynamic dims by their Dim names), which checks
without warnings and agrees with the module; an operator it cannot write
names the operator and the module's line; `python -m nax.importer` does
the same for a saved program."""

import subprocess
import sys

import numpy as np
import pytest

import nax

from conftest import nax_binary

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the importer is not tested")


class Block(torch.nn.Module):
    """A pre-norm MLP block with a square projection and a softmax over a
    transposed axis: linear, gelu (tanh), add, layer_norm, transpose, softmax."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 8)
        self.ln = torch.nn.LayerNorm(8)
        self.square = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(x), approximate="tanh")
        y = self.ln(x + self.fc2(h))
        return torch.softmax(self.square(y).transpose(1, 2), -1)


class Applied(torch.nn.Module):
    """A function of tensors as a module, for `torch.export`."""

    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, *tensors):
        return self.f(*tensors)


def agrees_everywhere(imported, model, calls, tmp_path, atol=1e-5):
    """The imported program checks without a warning and, on every CPU back
    end and through a library built by `nax build --emit so` (called
    through its C ABI), gives the module's outputs for each argument tuple
    of `calls`."""
    expected = []
    for args in calls:
        want = model(*args)
        expected.append([t.detach().numpy() for t in (want if isinstance(want, tuple) else (want,))])
    compiled = [imported.compile(backend=b) for b in ("llvm", "cranelift", "mlir", "interp")]
    binary = nax_binary()
    if binary is not None:
        imported.save(tmp_path)
        checked = subprocess.run([binary, "check", str(tmp_path / "model.nax")], capture_output=True, text=True)
        assert checked.returncode == 0 and checked.stderr == "", checked.stderr
        out = subprocess.run([binary, "build", str(tmp_path / "model.nax"), "--emit", "so", "-o", str(tmp_path / "libimported.so")], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        compiled.append(nax.load(tmp_path / "libimported.so", weights=tmp_path / "weights.safetensors"))
    for program in compiled:
        for args, want in zip(calls, expected):
            got = program.forward(*args)
            got = list(got) if isinstance(got, tuple) else [got]
            assert len(got) == len(want)
            for ours, theirs in zip(got, want):
                np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-5, atol=atol)


@pytest.fixture(scope="module")
def block():
    torch.manual_seed(0)
    return Block().eval()


def test_an_exported_block_agrees_with_pytorch_at_every_batch_size(block, tmp_path):
    batch = torch.export.Dim("batch")
    imported = nax.from_torch(block, (torch.randn(3, 5, 8),), dynamic_shapes={"x": {0: batch}})
    assert "def forward(x: Real[batch d5 d8]) -> Prob(d5)[batch d8 d5]" in imported.source, imported.source
    assert "param fc1_weight: Real[d16 d8]" in imported.source
    assert set(imported.weights) == {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "ln_weight", "ln_bias", "square_weight", "square_bias"}
    compiled = imported.compile()
    for size in (1, 3, 7):
        x = torch.randn(size, 5, 8)
        got = np.asarray(compiled.forward(x))
        np.testing.assert_allclose(got, block(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    imported.save(tmp_path)
    binary = nax_binary()
    if binary is not None:
        out = subprocess.run([binary, "check", str(tmp_path / "model.nax")], capture_output=True, text=True)
        assert out.returncode == 0 and out.stderr == "", out.stderr


def test_static_sizes_take_the_names_given(block):
    imported = nax.from_torch(block, (torch.randn(2, 5, 8),), axis_names={8: "D", 16: "F", 5: "n"})
    assert "def forward(x: Real[d2 n D]) -> Prob(n)[d2 D n]" in imported.source, imported.source
    assert "dim D = 8" in imported.source and "dim D_2 = 8" in imported.source


def test_an_unsupported_operator_names_itself_and_the_modules_line():
    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.cumprod(x, 0)

    with pytest.raises(nax.UnsupportedOperator) as error:
        nax.from_torch(Odd(), (torch.randn(4),))
    message = str(error.value)
    assert "aten.cumprod" in message and "node `cumprod`" in message, message
    assert "test_importer.py" in message and "in forward" in message, message


def test_a_saved_program_imports_from_the_command_line(block, tmp_path):
    program = torch.export.export(block, (torch.randn(2, 5, 8),))
    torch.export.save(program, tmp_path / "block.pt2")
    out = subprocess.run([sys.executable, "-m", "nax.importer", str(tmp_path / "block.pt2"), "-o", str(tmp_path / "out")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    source = (tmp_path / "out" / "model.nax").read_text()
    m = nax.compile(source, weights=str(tmp_path / "out" / "weights.safetensors"))
    x = torch.randn(2, 5, 8)
    np.testing.assert_allclose(np.asarray(m.forward(x)), block(x).detach().numpy(), rtol=1e-5, atol=1e-6)


class CausalAttention(torch.nn.Module):
    """Embedding, a fused q/k/v projection split in three, heads by view
    and transpose, causal scaled_dot_product_attention, heads merged by
    reshape, the output projection and a residual."""

    def __init__(self, width=16, heads=4):
        super().__init__()
        self.heads = heads
        self.embed = torch.nn.Embedding(50, width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)

    def forward(self, ids):
        x = self.embed(ids)
        b, n, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(o.transpose(1, 2).reshape(b, n, d))


def test_causal_attention_with_dynamic_batch_and_sequence_agrees_with_pytorch():
    torch.manual_seed(1)
    model = CausalAttention().eval()
    dims = {"ids": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq", max=64)}}
    imported = nax.from_torch(model, (torch.randint(0, 50, (2, 6)),), dynamic_shapes=dims)
    assert "def forward(ids: Int[batch seq]) -> Real[batch seq d16]" in imported.source, imported.source
    compiled = imported.compile()
    for b, n in ((2, 6), (3, 9), (1, 1)):
        ids = torch.randint(0, 50, (b, n))
        np.testing.assert_allclose(np.asarray(compiled.forward(ids)), model(ids).detach().numpy(), rtol=1e-5, atol=1e-6)


class GatedBlock(torch.nn.Module):
    """RMSNorm (a mean kept as an axis of size 1, broadcast back), SwiGLU,
    a parameter with an axis of size 1, and a result with one."""

    def __init__(self, width=8, hidden=12):
        super().__init__()
        self.norm_weight = torch.nn.Parameter(torch.randn(width))
        self.gate = torch.nn.Linear(width, hidden, bias=False)
        self.up = torch.nn.Linear(width, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, width, bias=False)
        self.scale = torch.nn.Parameter(torch.randn(1, width))

    def forward(self, x):
        h = self.norm_weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
        y = x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))
        return (y * self.scale).unsqueeze(1)


def test_axes_of_size_one_broadcast_as_in_pytorch():
    torch.manual_seed(2)
    model = GatedBlock().eval()
    dims = {"x": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}}
    imported = nax.from_torch(model, (torch.randn(3, 5, 8),), dynamic_shapes=dims)
    assert "param scale: Real[1 d8]" in imported.source and "-> Real[batch 1 seq d8]" in imported.source, imported.source
    compiled = imported.compile()
    for b, n in ((3, 5), (2, 7), (1, 1)):
        x = torch.randn(b, n, 8)
        np.testing.assert_allclose(np.asarray(compiled.forward(x)), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


class PairwiseCausal(torch.nn.Module):
    """Outer broadcasting (x[:, :, None] - x[:, None]), a mean, a causal
    mask from two aranges compared, masked_fill and a softmax; a rank-0
    tensor argument."""

    def forward(self, x, s):
        n = x.shape[1]
        d = x.unsqueeze(2) - x.unsqueeze(1)
        causal = torch.arange(n).unsqueeze(1) >= torch.arange(n).unsqueeze(0)
        scores = ((d * d).mean(-1) * s).masked_fill(causal == False, float("-inf"))  # noqa: E712 (torch's eq)
        return torch.softmax(scores, -1)


def test_outer_broadcasting_and_a_causal_mask_agree_with_pytorch():
    model = PairwiseCausal().eval()
    dims = {"x": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}, "s": None}
    imported = nax.from_torch(model, (torch.randn(2, 5, 3), torch.tensor(0.5)), dynamic_shapes=dims)
    assert "-> Prob(seq_2)[batch seq seq_2]" in imported.source, imported.source
    compiled = imported.compile()
    for b, n in ((2, 5), (3, 7), (1, 1)):
        x = torch.randn(b, n, 3)
        np.testing.assert_allclose(np.asarray(compiled.forward(x, torch.tensor(0.5))), model(x, torch.tensor(0.5)).numpy(), rtol=1e-5, atol=1e-6)


class CausalLogits(torch.nn.Module):
    """A causal language model's logits without a cache: what is exported of it."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids, use_cache=False).logits


class BertOutputs(torch.nn.Module):
    """BERT's last hidden states and, with `pooled`, its pooler's output."""

    def __init__(self, model, pooled):
        super().__init__()
        self.model = model
        self.pooled = pooled

    def forward(self, ids, types):
        out = self.model(input_ids=ids, token_type_ids=types)
        return (out.last_hidden_state, out.pooler_output) if self.pooled else out.last_hidden_state


def small_gpt2(transformers):
    config = transformers.GPT2Config(n_layer=2, n_embd=16, n_head=4, vocab_size=50, n_positions=32, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config).eval()


def small_llama(transformers):
    config = transformers.LlamaConfig(
        vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=32, bos_token_id=0, eos_token_id=0, pad_token_id=0,
    )
    return transformers.LlamaForCausalLM(config).eval()


def small_bert(transformers):
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24, max_position_embeddings=32, type_vocab_size=2)
    return transformers.BertModel(config).eval()


def test_transformers_gpt2_imports_and_agrees_with_pytorch(tmp_path):
    """Hugging Face's GPT2LMHeadModel (a small random configuration), with
    its mask built from positions (arange, diff, cumsum, advanced indexing,
    comparisons) and sdpa: the logits at several batch and sequence sizes."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: the GPT-2 import is not tested")
    torch.manual_seed(3)
    wrapped = CausalLogits(small_gpt2(transformers)).eval()
    dims = {"ids": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq", max=32)}}
    imported = nax.from_torch(wrapped, (torch.randint(0, 50, (2, 6)),), dynamic_shapes=dims)
    assert "def forward(ids: Int[batch seq]) -> Real[batch seq d50]" in imported.source
    agrees_everywhere(imported, wrapped, [(torch.randint(0, 50, (b, n)),) for b, n in ((2, 6), (1, 9), (3, 1))], tmp_path)
    binary = nax_binary()
    if binary is not None:
        out = subprocess.run([binary, "check", str(tmp_path / "model.nax")], capture_output=True, text=True)
        assert out.returncode == 0 and out.stderr == "", out.stderr


def test_transformers_llama_imports_and_agrees_with_pytorch(tmp_path):
    """LlamaForCausalLM (small, random): RMSNorm, rotary embeddings (a float
    position product, cat, cos and sin), grouped-query attention (2 key and
    value heads for 4 query heads) and SwiGLU."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: the Llama import is not tested")
    torch.manual_seed(4)
    wrapped = CausalLogits(small_llama(transformers)).eval()
    dims = {"ids": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq", max=32)}}
    imported = nax.from_torch(wrapped, (torch.randint(0, 50, (2, 6)),), dynamic_shapes=dims)
    agrees_everywhere(imported, wrapped, [(torch.randint(0, 50, (b, n)),) for b, n in ((2, 6), (1, 9))], tmp_path)


def test_transformers_bert_imports_with_several_results(tmp_path):
    """BertModel (small, random): token types, bidirectional attention and
    the pooler; its two outputs become a function of two results (a named
    tuple in Python)."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: the BERT import is not tested")
    torch.manual_seed(5)
    wrapped = BertOutputs(small_bert(transformers), pooled=True).eval()
    dim = {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq", max=32)}
    example = (torch.randint(0, 50, (2, 6)), torch.randint(0, 2, (2, 6)))
    imported = nax.from_torch(wrapped, example, dynamic_shapes={"ids": dim, "types": dim})
    assert "def forward(ids: Int[batch seq], types: Int[batch seq]) -> (" in imported.source
    calls = [(torch.randint(0, 50, (b, n)), torch.randint(0, 2, (b, n))) for b, n in ((2, 6), (1, 9))]
    agrees_everywhere(imported, wrapped, calls, tmp_path)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_families_agree_within_their_rounding(dtype):
    """GPT-2, Llama and BERT with bf16 and f16 weights: nax computes in the
    weights' dtype as PyTorch does (Llama's RMSNorm in f32 between two
    conversions); the outputs agree within a few units of that dtype's
    rounding at the outputs' scale."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: the half-precision imports are not tested")
    dtype = getattr(torch, dtype)
    torch.manual_seed(6)
    dim = {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq", max=32)}
    gpt2, llama, bert = (CausalLogits(small_gpt2(transformers)), CausalLogits(small_llama(transformers)), BertOutputs(small_bert(transformers), pooled=False))
    ids, types = torch.randint(0, 50, (2, 6)), torch.randint(0, 2, (2, 6))
    families = ((gpt2, (ids,), {"ids": dim}), (llama, (ids,), {"ids": dim}), (bert, (ids, types), {"ids": dim, "types": dim}))
    for model, args, dims in families:
        model = model.eval().to(dtype)
        imported = nax.from_torch(model, args, dynamic_shapes=dims)
        assert ("bf16[" if dtype == torch.bfloat16 else "f16[") in imported.source
        got = torch.from_dlpack(imported.compile().forward(*args)).float().numpy()
        want = model(*args).float().detach().numpy()
        step = torch.finfo(dtype).eps * float(np.abs(want).max())
        np.testing.assert_allclose(got, want, rtol=0, atol=8 * step)


class EncoderStates(torch.nn.Module):
    """An encoder's last hidden states (T5's encoder)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids).last_hidden_state


def families_beyond_the_listed(transformers):
    """Small random models of families the importer was not written for,
    each with what sets it apart: GPT-NeoX (a fused QKV split by `chunk`,
    rotary on a part of each head, `cat`), GPT-J (rotary on every second
    feature: `stack` and `repeat_interleave`), OPT (learned positions from
    a cumulative mask, `ones`), Falcon (multi-query: the key and value
    heads parts of size 1 of one projection, `split` by sizes, an in-place
    residual `add_`, transposed weights by `numpy_T`, a parallel MLP) and
    T5's encoder (relative position buckets: `abs`, `log`, `min`, `full_like`,
    `where` on integers, an additive attention bias)."""
    return {
        "gpt_neox": CausalLogits(transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
            vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24,
            max_position_embeddings=32, rotary_pct=0.5, bos_token_id=0, eos_token_id=0))),
        "gptj": CausalLogits(transformers.GPTJForCausalLM(transformers.GPTJConfig(
            vocab_size=50, n_embd=32, n_layer=2, n_head=4, n_positions=32, rotary_dim=4, bos_token_id=0, eos_token_id=0))),
        "opt": CausalLogits(transformers.OPTForCausalLM(transformers.OPTConfig(
            vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, ffn_dim=24, max_position_embeddings=32,
            word_embed_proj_dim=16, bos_token_id=0, eos_token_id=0, pad_token_id=1))),
        "falcon": CausalLogits(transformers.FalconForCausalLM(transformers.FalconConfig(
            vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, bos_token_id=0, eos_token_id=0))),
        "t5_encoder": EncoderStates(transformers.T5EncoderModel(transformers.T5Config(
            vocab_size=50, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=4))),
    }


@pytest.mark.parametrize("family", ["gpt_neox", "gptj", "opt", "falcon", "t5_encoder"])
def test_families_the_importer_was_not_written_for_agree_with_pytorch(family):
    """Each family imports and agrees with PyTorch within 1e-5 on the
    interpreter and llvm, at two batch and sequence sizes."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: the families are not imported")
    torch.manual_seed(7)
    model = families_beyond_the_listed(transformers)[family].eval()
    dims = {"ids": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq", max=32)}}
    imported = nax.from_torch(model, (torch.randint(0, 50, (2, 6)),), dynamic_shapes=dims)
    calls = [torch.randint(0, 50, (b, n)) for b, n in ((2, 6), (1, 9))]
    for backend in ("interp", "llvm"):
        compiled = imported.compile(backend=backend)
        for ids in calls:
            want = model(ids).detach().numpy()
            np.testing.assert_allclose(np.asarray(compiled.forward(ids)), want, rtol=1e-5, atol=1e-5, err_msg=f"{family} on {backend}")


def families_of_convolutions(transformers):
    """Hugging Face families built on convolutions, pools and windows, at
    small sizes, each returning one tensor: ResNet (conv, batch norm, max
    pool, adaptive average pool), ConvNeXt (depthwise convolutions, layer
    norm over channels), ViT (a strided patch convolution, attention) and
    Whisper's encoder (1-d convolutions with a stride, attention),
    SegFormer (fewer keys than queries, as many as the head's size: the
    attention the importer once contracted wrongly), Wav2Vec2 (strided 1-d
    convolutions, a grouped positional convolution under weight norm) and
    Swin (windows by rolls and views)."""
    whisper = transformers.WhisperConfig(
        num_mel_bins=16, d_model=32, encoder_layers=2, encoder_attention_heads=4, decoder_layers=1, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=20, vocab_size=100, pad_token_id=1, bos_token_id=2,
        eos_token_id=3, decoder_start_token_id=2,
    )
    return {
        "resnet": (
            Applied(transformers.ResNetForImageClassification(transformers.ResNetConfig(
                embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", num_labels=5)).eval()),
            lambda module, x: module.f(x).logits,
            (2, 3, 32, 32),
        ),
        "convnext": (
            Applied(transformers.ConvNextModel(transformers.ConvNextConfig(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2)).eval()),
            lambda module, x: module.f(x).last_hidden_state,
            (2, 3, 32, 32),
        ),
        "vit": (
            Applied(transformers.ViTModel(transformers.ViTConfig(
                image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)).eval()),
            lambda module, x: module.f(x).last_hidden_state,
            (2, 3, 32, 32),
        ),
        "whisper_encoder": (
            Applied(transformers.WhisperModel(whisper).encoder.eval()),
            lambda module, x: module.f(x).last_hidden_state,
            (2, 16, 40),
        ),
        "segformer": (
            Applied(transformers.SegformerModel(transformers.SegformerConfig(
                num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2],
                mlp_ratios=[2, 2], patch_sizes=[7, 3], strides=[4, 2])).eval()),
            lambda module, x: module.f(x).last_hidden_state,
            (2, 3, 32, 32),
        ),
        "wav2vec2": (
            Applied(transformers.Wav2Vec2Model(transformers.Wav2Vec2Config(
                hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)).eval()),
            lambda module, x: module.f(x).last_hidden_state,
            (2, 400),
        ),
        "swin": (
            Applied(transformers.SwinModel(transformers.SwinConfig(
                image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4)).eval()),
            lambda module, x: module.f(x).last_hidden_state,
            (2, 3, 32, 32),
        ),
    }


@pytest.mark.parametrize("family", ["resnet", "convnext", "vit", "whisper_encoder", "segformer", "wav2vec2", "swin"])
def test_families_of_convolutions_agree_with_pytorch(family):
    """Each imports and agrees with PyTorch within 1e-5 (at the output's
    scale) on the interpreter and llvm."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: the families are not imported")
    torch.manual_seed(7)
    inner, output, shape = families_of_convolutions(transformers)[family]
    model = Applied(lambda x: output(inner, x)).eval()
    model.inner = inner  # its weights the module's parameters, as a user's module holds them
    x = torch.randn(shape)
    imported = nax.from_torch(model, (x,))
    want = model(x).detach().numpy()
    for backend in ("interp", "llvm"):
        got = np.asarray(imported.compile(backend=backend).forward(x))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())), err_msg=f"{family} on {backend}")


def test_attention_names_its_keys_and_head_apart_whatever_their_sizes():
    """`scaled_dot_product_attention` where the keys are as many as the
    head's size (the head and the keys were once lined up by size, a wrong
    answer), one query and one key, an additive mask, causal, and values
    with a head of another size: all as torch's, measured against f64."""
    functional = torch.nn.functional
    cases = [
        (lambda q, k, v: functional.scaled_dot_product_attention(q, k, v), (2, 1, 64, 16), (2, 1, 16, 16), (2, 1, 16, 16)),
        (lambda q, k, v: functional.scaled_dot_product_attention(q, k, v), (2, 3, 1, 8), (2, 3, 1, 8), (2, 3, 1, 8)),
        (lambda q, k, v: functional.scaled_dot_product_attention(q, k, v, is_causal=True), (1, 4, 6, 8), (1, 4, 6, 8), (1, 4, 6, 6)),
        (lambda q, k, v, m: functional.scaled_dot_product_attention(q, k, v, attn_mask=m), (2, 2, 5, 8), (2, 2, 7, 8), (2, 2, 7, 64), (5, 7)),
    ]
    for f, *shapes in cases:
        args = tuple(torch.randn(shape) for shape in shapes)
        imported = nax.from_torch(Applied(f), args)
        exact = f(*[a.double() for a in args]).numpy()
        for backend in ("interp", "llvm"):
            got = np.asarray(imported.compile(backend=backend).forward(*args)).reshape(exact.shape)
            np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5)


def test_copy_and_numel_of_dynamic_dims_agree_with_pytorch():
    """`aten.copy` (the source broadcast to the destination's shape) and a
    tensor's element count over dynamic dims (`sym_numel`, a product of
    size names), which no OpInfo test exports alone."""

    class Copies(torch.nn.Module):
        def forward(self, x, y):
            return torch.ops.aten.copy.default(x, y) * x.numel()

    dims = {"x": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}, "y": {0: torch.export.Dim("seq")}}
    x, y = torch.randn(2, 3), torch.randn(3)
    imported = nax.from_torch(Copies(), (x, y), dynamic_shapes=dims)
    for backend in ("interp", "llvm"):
        compiled = imported.compile(backend=backend)
        for b, n in ((2, 3), (4, 5)):
            x, y = torch.randn(b, n), torch.randn(n)
            np.testing.assert_allclose(np.asarray(compiled.forward(x, y)), Copies()(x, y).numpy(), rtol=1e-6)


def test_concatenating_parts_of_size_one_agrees_with_pytorch():
    """`torch.cat` of parts one long along the axis (absent from nax's
    values: each is given the axis), twice in one program."""

    class Columns(torch.nn.Module):
        def forward(self, a, b):
            first = torch.cat([a[:, :1], b, a[:, 1:2]], 1)
            return first * 2 + torch.cat([torch.cat([a[:, :1], a[:, :1]], 1), b[:, :1]], 1).sum(1, keepdim=True)

    a, b = torch.randn(3, 4), torch.randn(3, 2)
    imported = nax.from_torch(Columns(), (a, b))
    for backend in ("interp", "llvm"):
        np.testing.assert_allclose(np.asarray(imported.compile(backend=backend).forward(a, b)), Columns()(a, b).numpy(), rtol=1e-6, atol=1e-6)


def test_max_and_min_over_a_dim_give_torchs_values_and_indices():
    """`torch.max(x, dim)` and `torch.min`: the values and the indices (the
    first of a tie, a nan's own; of masks and over an axis of size 1 too), as two results; the OpInfo sweep leaves
    out results that are pairs."""

    class Extremes(torch.nn.Module):
        def forward(self, x):
            top, where_top = torch.max(x, 1)
            low, where_low = torch.min(x, 0, keepdim=True)
            return top, where_top, low, where_low

    x = torch.tensor([[1.0, float("nan"), 3.0, 3.0], [2.0, 5.0, 5.0, -1.0], [float("-inf")] * 4])
    agrees_exactly(Extremes(), (x,))
    agrees_exactly(Extremes(), (torch.tensor([[True, False, True], [False, False, True]]),))
    agrees_exactly(Extremes(), (torch.tensor([[2], [7]]),))


def agrees_exactly(model, args):
    """The imported module gives exactly the module's results on interp and llvm."""
    imported = nax.from_torch(model, args)
    want = model(*args)
    want = want if isinstance(want, tuple) else (want,)
    for backend in ("interp", "llvm"):
        got = imported.compile(backend=backend).forward(*args)
        got = got if isinstance(got, tuple) else (got,)
        for ours, theirs in zip(got, want):
            np.testing.assert_array_equal(np.asarray(ours).reshape(theirs.shape), theirs.numpy())


def test_integer_powers_by_squaring_wrap_as_torchs():
    """`x ** 7` and `x ** 40` of int64 (repeated squaring; products that
    overflow wrap as torch's do), which the OpInfo samples do not reach."""

    class Powers(torch.nn.Module):
        def forward(self, x):
            return x**7, x**40

    agrees_exactly(Powers(), (torch.tensor([[-3, 0, 1, 2], [5, 7, -1, 1000003]]),))


def test_indexing_by_several_tensors_and_negative_positions():
    """`x[i, j]` by index tensors broadcast together, negatives counted from
    the end, the indexed axes neighbours or not (torch then puts the index
    axes first), and of axes of size 1."""

    class Indexed(torch.nn.Module):
        def forward(self, x, ones, i, j, k):
            return x[i, j], x[:, i, k], x[i, :, k], ones[i * 0, k[None] * 0]

    x, ones = torch.randn(4, 5, 6), torch.randn(1, 1, 3)
    i, j, k = torch.tensor([[0, -1, 2]]), torch.tensor([[1], [-2]]), torch.tensor([5, -6, 0])
    agrees_exactly(Indexed(), (x, ones, i, j, k))


def test_a_gather_by_a_position_out_of_range_fails_the_call():
    """torch's gather fails on an index outside the axis; nax's too (the
    indices pass through `take`), never a sum over no position."""

    class Gathered(torch.nn.Module):
        def forward(self, x, i):
            return torch.gather(x, 1, i)

    x, i = torch.randn(3, 4), torch.tensor([[0, 3], [1, 1], [2, 0]])
    imported = nax.from_torch(Gathered(), (x, i))
    for backend in ("interp", "llvm"):
        compiled = imported.compile(backend=backend)
        np.testing.assert_array_equal(np.asarray(compiled.forward(x, i)), Gathered()(x, i).numpy())
        with pytest.raises(Exception, match="take: index 4 is outside axis"):
            compiled.forward(x, torch.tensor([[0, 4], [1, 1], [2, 0]]))


def test_reductions_and_products_over_axes_of_size_one():
    """Axes of size 1 are absent from nax's values: max over one (its
    index 0), layer_norm and softmax over one element, a matrix product
    over a summed axis of size 1 (an outer product), a view that regroups."""

    class Singles(torch.nn.Module):
        def forward(self, x, column, row):
            top, at = torch.max(column, 1)
            normed = torch.nn.functional.layer_norm(column, (1,))
            return top, at, normed, torch.softmax(column, 1), column @ row, x.view(3, 4, 5).reshape(6, 10)

    x, column, row = torch.randn(2, 6, 5), torch.randn(4, 1), torch.randn(1, 3)
    imported = nax.from_torch(Singles(), (x, column, row))
    want = Singles()(x, column, row)
    for backend in ("interp", "llvm"):
        for ours, theirs in zip(imported.compile(backend=backend).forward(x, column, row), want):
            np.testing.assert_allclose(np.asarray(ours).reshape(theirs.shape), theirs.numpy(), rtol=1e-6, atol=1e-6)


def test_sort_and_topk_agree_with_pytorch():
    """`torch.sort` (ranks by comparison: nan above every number, ties in
    order) and `torch.topk`, of floats, integers and masks: the values
    exactly; the indices exactly where torch's sort is stable, else
    positions of those values (torch leaves the order of ties open). The
    OpInfo sweep leaves out results that are pairs."""
    nan = float("nan")
    x = torch.tensor([[3.0, nan, 1.0, 3.0, -2.0], [0.0, 0.0, 5.0, -1.0, nan], [1.0, 2.0, 3.0, 4.0, 5.0]])
    cases = [
        (lambda x: torch.sort(x, dim=1, stable=True), x, 1, True),
        (lambda x: torch.sort(x, dim=1, descending=True, stable=True), x, 1, True),
        (lambda x: torch.sort(x, 0), x, 0, False),
        (lambda x: torch.topk(x, 2, 1), x, 1, False),
        (lambda x: torch.topk(x, 1, 0, largest=False), x, 0, False),
        (lambda x: torch.sort(x, dim=1, stable=True), torch.tensor([[3, 1, 3, 2], [0, 0, -5, 7]]), 1, True),
        (lambda x: torch.sort(x, dim=1, descending=True, stable=True), torch.tensor([[True, False, True], [False, False, True]]), 1, True),
        (lambda x: torch.sort(x, 0), torch.randn(5, 1, 3), 0, False),
    ]

    for f, x, dim, stable in cases:
        imported = nax.from_torch(Applied(f), (x,))
        want_values, want_indices = f(x)
        for backend in ("interp", "llvm"):
            values, indices = (np.asarray(got).reshape(want.shape) for got, want in zip(imported.compile(backend=backend).forward(x), (want_values, want_indices)))
            np.testing.assert_array_equal(values, want_values.numpy())
            if stable:
                np.testing.assert_array_equal(indices, want_indices.numpy())
            np.testing.assert_array_equal(np.take_along_axis(x.numpy(), indices, dim), values)


def test_writes_by_position_accumulate_wrap_and_check_as_torchs():
    """`index_put` with `accumulate` sums duplicate positions, counts
    negatives from the end; `scatter_add` by a position outside the axis
    fails the call, as torch's does, rather than dropping the element."""

    class Writes(torch.nn.Module):
        def forward(self, x, rows, src):
            return torch.index_put(x, (rows,), src, accumulate=True), x.index_put((rows,), src * 2)

    # Whole numbers: a sum of duplicates is exact in any order (torch adds
    # them one by one, nax sums them first).
    x, rows, src = torch.randint(-8, 8, (4, 3)).float(), torch.tensor([0, -1, 0, 2]), torch.randn(4, 3)
    agrees_exactly(Writes(), (x, rows, torch.ones(4, 3)))

    class Scattered(torch.nn.Module):
        def forward(self, x, index, src):
            return torch.scatter_add(x, 0, index, src)

    index = torch.tensor([[0, 1, 3], [3, 3, 0]])
    imported = nax.from_torch(Scattered(), (x, index, src[:2]))
    for backend in ("interp", "llvm"):
        compiled = imported.compile(backend=backend)
        np.testing.assert_allclose(np.asarray(compiled.forward(x, index, src[:2])), Scattered()(x, index, src[:2]).numpy(), rtol=1e-6)
        with pytest.raises(Exception, match="take: index 4 is outside axis"):
            compiled.forward(x, torch.tensor([[0, 1, 4], [3, 3, 0]]), src[:2])


def test_cdist_broadcasts_batches_and_axes_of_size_one():
    """`torch.cdist` of batches that broadcast and of rows or features of
    size 1, for p in 0, 1, 2, 3 and inf (the OpInfo samples are of equal
    batches only)."""

    for a, b in [((1, 3), (5, 3)), ((4, 1), (5, 1)), ((2, 1, 4, 3), (3, 5, 3)), ((4, 3), (1, 3))]:
        for p in (0.0, 1.0, 2.0, 3.0, float("inf")):
            x, y = torch.randn(a), torch.randn(b)
            imported = nax.from_torch(Applied(lambda a, b: torch.cdist(a, b, p=p)), (x, y))
            want = torch.cdist(x, y, p=p)
            for backend in ("interp", "llvm"):
                got = np.asarray(imported.compile(backend=backend).forward(x, y))
                np.testing.assert_allclose(got.reshape(want.shape), want.numpy(), rtol=1e-5, atol=1e-5)


def test_max_pool_indices_are_torchs():
    """`max_pool1d/2d/3d(..., return_indices=True)`: each window's largest
    element and its index in the input plane, the first of a tie and the
    last nan as torch's loops choose, with padding, dilation and
    `ceil_mode`, of floats and integers (the OpInfo sweep leaves out
    results that are pairs)."""
    functional = torch.nn.functional
    x = torch.randn(2, 3, 7, 6)
    x[0, 0, 1, 1] = float("nan")
    x[0, 1, 2:4, 2:4] = 1.5
    x[1, 2, 4, 0:2] = float("nan")
    cases = [
        (lambda x: functional.max_pool2d(x, 3, return_indices=True), x),
        (lambda x: functional.max_pool2d(x, (3, 2), stride=(2, 1), padding=1, dilation=(1, 2), ceil_mode=True, return_indices=True), x),
        (lambda x: functional.max_pool1d(x[0], 3, stride=2, padding=1, ceil_mode=True, return_indices=True), x),
        (lambda x: functional.max_pool3d(x[None], (1, 2, 2), return_indices=True), x),
        (lambda x: functional.max_pool2d(x, 2, padding=1, ceil_mode=True, return_indices=True), (torch.randn(2, 3, 7, 6) * 10).long()),
    ]

    for f, x in cases:
        agrees_exactly(Applied(f), (x,))


def test_fold_sums_blocks_back_as_torchs():
    """`F.fold` (`aten.col2im`, which no OpInfo test of this PyTorch
    exports): blocks summed back into their places, with dilation, padding
    and stride, batched or not."""
    functional = torch.nn.functional

    blocks = functional.unfold(torch.randn(1, 3, 7, 6), (3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
    cases = [
        (lambda x: functional.fold(x, (4, 5), (2, 2)), torch.randn(2, 3 * 4, 12)),
        (lambda x: functional.fold(x, (7, 6), (3, 2), dilation=(1, 2), padding=1, stride=(2, 1)), blocks),
        (lambda x: functional.fold(x, (4, 4), 2, stride=2), torch.randn(8, 4)),
    ]
    for f, x in cases:
        imported = nax.from_torch(Applied(f), (x,))
        want = f(x)
        for backend in ("interp", "llvm"):
            got = np.asarray(imported.compile(backend=backend).forward(x)).reshape(want.shape)
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_inverse_trigonometric_and_hyperbolic_functions_are_within_an_ulp():
    """atan, asin, acos, atan2, atanh, asinh, acosh (the language has no
    built-ins for them: the importer writes them in f64 and rounds once):
    f32 results within one ulp of the f64 value rounded, over magnitudes
    from 1e-30 to 1e30 and the domains' edges; signed zeros, infinities,
    nans and atan2's quadrants as torch's."""
    rng = np.random.default_rng(0)
    magnitudes = np.exp(rng.uniform(np.log(1e-30), np.log(1e30), 20000))
    spread = np.concatenate([magnitudes, -magnitudes, rng.uniform(-1, 1, 20000), 1 - np.exp(rng.uniform(-16, 0, 5000)), -1 + np.exp(rng.uniform(-16, 0, 5000))])
    cases = [
        (torch.atan, np.arctan, spread),
        (torch.asin, np.arcsin, spread[np.abs(spread) <= 1]),
        (torch.acos, np.arccos, spread[np.abs(spread) <= 1]),
        (torch.atanh, np.arctanh, spread[np.abs(spread) < 1]),
        (torch.asinh, np.arcsinh, spread),
        (torch.acosh, np.arccosh, 1 + np.abs(spread)),
    ]

    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -1.0, 2.0, -2.0])
    for f, exact, values in cases:
        x = torch.from_numpy(values.astype(np.float32))
        for probe in (x, special):
            imported = nax.from_torch(Applied(f), (probe,))
            for backend in ("interp", "llvm"):
                got = np.asarray(imported.compile(backend=backend).forward(probe))
                if probe is special:
                    want = f(probe).numpy()
                    np.testing.assert_array_equal(got, want)
                    assert np.array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)])), f.__name__
                else:
                    rounded = exact(values.astype(np.float32).astype(np.float64)).astype(np.float32)
                    ulps = np.abs(got.astype(np.float64) - rounded) / np.spacing(np.abs(rounded))
                    assert ulps.max() <= 1.0, (f.__name__, backend, ulps.max())
    quadrants = [0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan"), 3.0]
    y = torch.tensor([a for a in quadrants for _ in quadrants])
    x = torch.tensor([b for _ in quadrants for b in quadrants])
    imported = nax.from_torch(Applied(torch.atan2), (y, x))
    want = torch.atan2(y, x).numpy()
    for backend in ("interp", "llvm"):
        got = np.asarray(imported.compile(backend=backend).forward(y, x))
        np.testing.assert_allclose(got, want, rtol=2e-7, atol=0)
        assert np.array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))


def test_grid_sample_in_every_mode_and_padding():
    """`F.grid_sample`, bilinear, nearest and bicubic, with zeros, border
    and reflection padding, corners aligned or not, at points inside and
    outside the input (the OpInfo samples do not reach every pairing)."""
    functional = torch.nn.functional

    x, grid = torch.randn(2, 3, 5, 6), torch.rand(2, 4, 7, 2) * 2.6 - 1.3
    for mode in ("bilinear", "nearest", "bicubic"):
        for padding_mode in ("zeros", "border", "reflection"):
            for align_corners in (False, True):
                module = Applied(lambda x, grid: functional.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners))
                imported = nax.from_torch(module, (x, grid))
                for backend in ("interp", "llvm"):
                    got = np.asarray(imported.compile(backend=backend).forward(x, grid))
                    np.testing.assert_allclose(got, module(x, grid).numpy(), rtol=1e-5, atol=1e-5)
