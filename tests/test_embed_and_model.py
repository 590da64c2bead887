import pytest
import torch

from icl_core import LinearRegression, Transformer
from icl_core.embed import Layout, interleaved_tokens, stacked_tokens, to_columns


def test_stacked_tokens_zero_the_query_label_and_transpose_to_Z():
    p = LinearRegression(3).sample(2, 5, seed=0, n_context=3)
    tok = stacked_tokens(p.x, p.y, 3)
    assert tok.shape == (2, 5, 4)
    assert torch.all(tok[:, 3:, -1] == 0) and torch.equal(tok[:, :3, -1], p.y[:, :3])
    Z = to_columns(tok)
    assert Z.shape == (2, 4, 5) and torch.equal(Z[:, :3, :], p.x.transpose(1, 2))


def test_interleaved_tokens():
    p = LinearRegression(3).sample(2, 4, seed=0)
    tok = interleaved_tokens(p.x, p.y)
    assert tok.shape == (2, 8, 3)
    assert torch.equal(tok[:, 0::2], p.x) and torch.equal(tok[:, 1::2, 0], p.y)
    assert torch.all(tok[:, 1::2, 1:] == 0)


def test_key_mask():
    m = Layout("stacked").key_mask(4, 2, causal=False)
    assert m.tolist() == [[True, True, False, False]] * 4
    assert Layout("stacked", query_is_key=True).key_mask(4, 2, causal=False) is None
    assert torch.equal(Layout("interleaved").key_mask(3, 2, causal=True),
                       torch.ones(3, 3, dtype=torch.bool).tril())


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("norm", ["pre", "post", "none"])
def test_shapes(attention, norm):
    p = LinearRegression(4).sample(3, 9, seed=0)
    dec = Transformer(4, 16, 2, 2, attention=attention, norm=norm)
    assert dec.predict(p).shape == (3, 9) and dec.targets(p).shape == (3, 9)
    enc = Transformer(4, 16, 2, 4, attention=attention, norm=norm, layout="stacked", d_mlp=0)
    p2 = LinearRegression(4).sample(3, 9, seed=0, n_context=6)
    assert enc.predict(p2).shape == (3, 3) and enc.targets(p2).shape == (3, 3)


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_decoder_is_causal(attention):
    torch.manual_seed(0)
    model = Transformer(3, 16, 2, 2, attention=attention)
    p = LinearRegression(3).sample(2, 6, seed=0)
    out = model.predict(p)
    x, y = p.x.clone(), p.y.clone()
    x[:, 4], y[:, 3] = 10.0, -7.0        # change point 4 and the label of point 3
    out2 = model(x, y, 5)
    assert torch.allclose(out[:, :4], out2[:, :4], atol=1e-6)   # predictions 0..3 see neither
    assert not torch.allclose(out[:, 4], out2[:, 4])


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_encoder_never_sees_query_labels_or_other_queries(attention):
    torch.manual_seed(0)
    model = Transformer(3, 16, 2, 2, attention=attention, layout="stacked")
    p = LinearRegression(3).sample(2, 8, seed=0, n_context=5)
    out = model.predict(p)
    y = p.y.clone(); y[:, 5:] = 100.0
    x = p.x.clone(); x[:, 7] = 5.0        # move the last query: the others must not change
    out2 = model(x, y, 5)
    assert torch.allclose(out[:, :2], out2[:, :2], atol=1e-6)


def test_same_seed_same_model():
    torch.manual_seed(3); a = Transformer(3, 16, 1, 2)
    torch.manual_seed(3); b = Transformer(3, 16, 1, 2)
    p = LinearRegression(3).sample(2, 4, seed=0)
    assert torch.equal(a.predict(p), b.predict(p))


@pytest.mark.parametrize("kwargs, match", [
    (dict(d=0), "d must be"), (dict(d=3, d_model=0), "d_model"), (dict(d=3, n_layers=0), "n_layers"),
    (dict(d=3, n_heads=0), "n_heads"), (dict(d=3, d_model=10, n_heads=3), "divisible"),
    (dict(d=3, attention="relu"), "attention"), (dict(d=3, norm="batch"), "norm"),
    (dict(d=3, layout="columns"), "layout"), (dict(d=3, causal=False), "causal"),
    (dict(d=3, d_mlp=-1), "d_mlp"),
])
def test_bad_model_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Transformer(**kwargs)


def test_mismatched_d_and_context():
    model = Transformer(4, 16, 1, 2, layout="stacked")
    with pytest.raises(ValueError, match="d=3 but the model was built for d=4"):
        model.predict(LinearRegression(3).sample(2, 4, seed=0))
    p = LinearRegression(4).sample(2, 4, seed=0)
    with pytest.raises(ValueError, match="n_context"):
        model(p.x, p.y, 0)


def test_learned_positions_gpt2_style():
    import pytest
    from icl_core import Transformer
    torch.manual_seed(0)
    plain = Transformer(3, 16, 1, 2)
    assert plain.pos is None and "positions" not in plain.config      # old checkpoints stay valid
    m = Transformer(3, 16, 1, 2, positions=14)
    assert m.config["positions"] == 14 and m.pos.weight.shape == (14, 16)
    x, y = torch.randn(2, 7, 3), torch.randn(2, 7)
    out = m(x, y, 6)                                                   # 7 points = 14 tokens
    out.sum().backward()
    assert m.pos.weight.grad[:14].abs().sum() > 0
    with torch.no_grad():                                              # positions change the output
        before = m(x, y, 6).clone()
        m.pos.weight.add_(torch.randn_like(m.pos.weight))          # (a constant shift would cancel in LayerNorm)
        assert not torch.allclose(before, m(x, y, 6))
    with pytest.raises(ValueError, match="positions=14"):
        m(torch.randn(2, 8, 3), torch.randn(2, 8), 7)                   # 16 tokens
    with pytest.raises(ValueError, match="positions"):
        Transformer(3, 16, 1, 2, positions=-1)
