#!/usr/bin/env python3
"""`meshc lsp` over JSON-RPC: every request the server offers, malformed messages, a
failing handler, an edit storm, a stdlib file, and a clean shutdown.

    python3 tests/lsp/test_lsp.py --meshc build/meshc [--stdlib stdlib]
"""
import argparse
import os
import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from lsp_client import LspClient, uri_of, position_of  # noqa: E402

MAIN = """\
mesh Pod = [data: 2, model: 4];

/// The tensor-parallel MLP.
fn mlp(x:  Tensor f32 [B, D] on Pod with {B: data},
       w1: Tensor f32 [D, H] on Pod with {H: model},
       w2: Tensor f32 [H, D] on Pod with {H: model})
    -> Tensor f32 [B, D] on Pod with {B: data}
{
    let h = relu(x @ w1);
    h @ w2
}

fn main() {
    let x  = random_normal(1, [8, 16]);
    let w1 = random_normal(2, [16, 32]) * 0.1;
    let w2 = random_normal(3, [32, 16]) * 0.1;
    let y = mlp(x, w1, w2);
    let z: Tensor f32 [8, 16] on Pod = y;
    print("sum", sum(z));
}
"""

STRICT = """\
mesh Pod = [data: 2, model: 4];

@explicit_comm
fn gather(x: Tensor f32 [8, 16] on Pod with {0: data}) -> Tensor f32 [8, 16] on Pod {
    x * 2.0
}
"""

# A struct value from a literal and names bound by a tuple pattern (issue 22, item 12:
# they hovered as "variable `p`" with no type).
AGGREGATES = """\
mesh Pod = [data: 2, model: 2];
struct Mlp {
    w1: Tensor f32 [8, 16] on Pod with {1: model},
    w2: Tensor f32 [16, 8] on Pod with {0: model},
}
fn loss(p: Mlp, x: Tensor f32 [4, 8] on Pod with {0: data}) -> f32 {
    mean((x @ p.w1) @ p.w2)
}
fn main() {
    let p = Mlp { w1: ones([8, 16]), w2: ones([16, 8]) };
    let x: Tensor f32 [4, 8] on Pod with {0: data} = ones([4, 8]);
    let (l, g) = value_and_grad(loss)(p, x);
    print(l, sum(g.w1));
}
"""

# A generic element type (`T: Float`): hover names its kind and the instances' types.
ELEMENT_TYPES = """\
mesh Pod = [data: 2];
fn scaled[T: Float](x: Tensor T [4] on Pod, s: T) -> Tensor T [4] on Pod {
    x * s
}
fn main() {
    print(scaled(cast(ones([4]), bf16), cast(2.0, bf16)), scaled(ones([4]), 2.0));
}
"""

# Effects (docs/language.md, "Effects"): hover on a function shows its declaration and
# each instance's inferred effect. `row`'s all_reduce over model of f32 [4, 8] sends
# 2(n-1)/n * 128 = 128 bytes per device at n = 2.
EFFECTS = """\
mesh Pod = [model: 2];
fn row(h: Tensor f32 [B, H] on Pod with {H: model}, w: Tensor f32 [H, D] on Pod with {H: model})
    -> Tensor f32 [B, D] on Pod ! comm(model <= 4 * B * D) {
    h @ w
}
fn main() {
    let h: Tensor f32 [4, 16] on Pod with {1: model} = ones([4, 16]);
    let w: Tensor f32 [16, 8] on Pod with {0: model} = ones([16, 8]);
    print(sum(row(h, w)));
}
"""

USES_STD = """\
import std.nn;
mesh Pod = [data: 2, model: 1];

fn main() {
    let x = random_normal(1, [4, 8]);
    let w = random_normal(2, [8, 8]);
    let b = zeros([8]);
    let y = nn.linear(x, w, b);
    print("y", sum(y));
}
"""

AUTO = """\
mesh Pod = [data: 2, model: 4];

struct W[M: Mesh, D, H] {
    w1: Tensor f32 [D, H] on M with auto,
    w2: Tensor f32 [H, D] on M with auto,
}

fn loss(p: W[Pod, D, H], x: Tensor f32 [B, D] on Pod with {B: data}) -> f32 {
    let h = relu(x @ p.w1);
    let y = h @ p.w2;
    mean(y * y)
}

fn main() {
    let x = random_normal(1, [4096, 64]);
    let p = W { w1: random_normal(2, [64, 256]) * 0.1, w2: random_normal(3, [256, 64]) * 0.1 };
    let (l, g) = value_and_grad(loss)(p, x);
    print("loss", l, sum(g.w1), sum(g.w2));
}
"""

PENDING = """\
mesh Pod = [data: 2];

@explicit_comm
fn square(x: Tensor f32 [8, 4] on Pod with {1: data}, w: Tensor f32 [4, 4] on Pod with {0: data},
          v: Tensor f32 [4, 4] on Pod with {1: data})
    -> Tensor f32 [8, 4] on Pod with {0: data} {
    let y = x @ w;
    let z = x @ v;
    y * y + z
}
"""


def apply_edits(text, edits):
    """The text after LSP TextEdits (ASCII: UTF-16 columns are byte columns)."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    def offset(p):
        return starts[p["line"]] + p["character"]
    for e in sorted(edits, key=lambda e: offset(e["range"]["start"]), reverse=True):
        text = text[:offset(e["range"]["start"])] + e["newText"] + text[offset(e["range"]["end"]):]
    return text


failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else f"\n     {detail}"))
    if not cond:
        failures.append(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", required=True)
    ap.add_argument("--stdlib", default=str(pathlib.Path(__file__).resolve().parents[2] / "stdlib"))
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="meshc-lsp-"))
    main_path, strict_path, std_user = work / "main.msh", work / "strict.msh", work / "uses_std.msh"
    main_path.write_text(MAIN)
    strict_path.write_text(STRICT)
    std_user.write_text(USES_STD)
    main_uri, strict_uri, std_user_uri = uri_of(main_path), uri_of(strict_path), uri_of(std_user)

    c = LspClient(args.meshc, ["--stdlib", args.stdlib])
    # Before initialize, requests are refused (and the server lives).
    m = c.response(c.request_async("textDocument/hover", {}))
    check(m.get("error", {}).get("code") == -32002, "request before initialize: ServerNotInitialized", m)

    init = c.initialize()
    caps = init["capabilities"]
    for cap in ("hoverProvider", "definitionProvider", "referencesProvider", "documentSymbolProvider",
                "inlayHintProvider", "semanticTokensProvider", "codeActionProvider"):
        check(cap in caps, f"initialize advertises {cap}", caps)

    # ------------------------------------------------------------ diagnostics
    c.open(main_uri, MAIN, 1)
    diags = c.diagnostics(main_uri, 1)
    check(diags == [], "a correct program has no diagnostics", diags)

    broken = MAIN.replace("mlp(x, w1, w2)", "mlp(x, w1, w3)")
    c.change_full(main_uri, broken, 2)
    diags = c.diagnostics(main_uri, 2)
    check(len(diags) == 1 and diags[0]["code"] == "E0201" and diags[0]["severity"] == 1,
          "didChange: unknown name is E0201, an error", diags)
    if diags:
        d = diags[0]
        check(d["range"]["start"] == {"line": position_of(broken, "w3")[0], "character": position_of(broken, "w3")[1]},
              "the diagnostic's range starts at the name", d)
        check(any("did you mean" in r["message"] for r in d.get("relatedInformation", [])),
              "notes are relatedInformation", d)
    # While names do not resolve there is no GIR: hovers and inlay hints in the unchanged
    # text come from the last version that had one.
    hv = c.at("textDocument/hover", main_uri, *position_of(broken, "h @ w2", delta=2))
    text = hv["contents"]["value"] if hv else ""
    check("partial {model}" in text and "as of the last version" in text, "hover during a name error: the last types", text)
    hv = c.at("textDocument/hover", main_uri, *position_of(broken, "w3"))
    check(hv is None, "no stale hover inside the edited text", hv)
    hints = c.request("textDocument/inlayHint", {"textDocument": {"uri": main_uri},
                                                 "range": {"start": {"line": 0, "character": 0},
                                                           "end": {"line": 100, "character": 0}}})
    check(len(hints) == 5, "inlay hints during a name error: the last ones, where the text did not change", hints)
    c.change_full(main_uri, MAIN, 3)
    check(c.diagnostics(main_uri, 3) == [], "fixing the error clears the diagnostics")

    # ------------------------------------------------------------ hover
    line, col = position_of(MAIN, "h @ w2", delta=2)
    hv = c.at("textDocument/hover", main_uri, line, col)
    text = hv["contents"]["value"] if hv else ""
    check("Tensor f32 [8, 16] on Pod with {0: data} partial {model}" in text, "hover on `h @ w2`: its type with layout", text)
    check("all_reduce sum over (model)" in text and "256 bytes per device" in text and "30.004 us" in text
          and "the result type of `mlp`" in text, "hover on `h @ w2`: the inserted all_reduce, bytes, cost, reason", text)

    line, col = position_of(MAIN, "h = relu")
    hv = c.at("textDocument/hover", main_uri, line, col)
    text = hv["contents"]["value"] if hv else ""
    check("Tensor f32 [8, 32] on Pod with {0: data, 1: model}" in text, "hover on `let h`: inferred layout", text)

    line, col = position_of(MAIN, "x @ w1", delta=2)
    hv = c.at("textDocument/hover", main_uri, line, col)
    text = hv["contents"]["value"] if hv else ""
    check("[8, 32]" in text, "hover on the operator of `x @ w1`: the contraction's type", text)

    line, col = position_of(MAIN, "mlp(x, w1, w2)", delta=1)
    hv = c.at("textDocument/hover", main_uri, line, col)
    text = hv["contents"]["value"] if hv else ""
    check("fn mlp(" in text and "The tensor-parallel MLP." in text, "hover on a called function: signature and doc", text)
    check("communication inside the call" in text and "all_reduce" in text, "hover on a call: the callee's collectives", text)

    line, col = position_of(MAIN, "z: Tensor")
    hv = c.at("textDocument/hover", main_uri, line, col)
    text = hv["contents"]["value"] if hv else ""
    check("communication in this `let`" in text and "all_gather" in text and "bytes per device" in text,
          "hover on an annotated let: its collectives", text)

    line, col = position_of(MAIN, "data: 2")
    hv = c.at("textDocument/hover", main_uri, line, col)
    text = hv["contents"]["value"] if hv else ""
    check("mesh axis `data` of `Pod`: size 2" in text, "hover on a mesh axis", text)

    def open_checked(name, source, what):
        """Opens `source` as work/NAME; it must check clean. Returns its uri."""
        uri = uri_of(work / name)
        (work / name).write_text(source)
        c.open(uri, source, 1)
        check(c.diagnostics(uri, 1) == [], what, None)
        return uri

    def hover_text(uri, source, needle):
        hv = c.at("textDocument/hover", uri, *position_of(source, needle))
        return hv["contents"]["value"] if hv else ""

    agg_uri = open_checked("aggregates.msh", AGGREGATES, "the aggregates program checks")
    text = hover_text(agg_uri, AGGREGATES, "p = Mlp")
    check("let p: 2 leaves" in text and "p.w1: Tensor f32 [8, 16] on Pod with {1: model}" in text
          and "p.w2: Tensor f32 [16, 8] on Pod with {0: model}" in text,
          "hover on a struct value bound by `let`: its leaves by path and type", text)
    text = hover_text(agg_uri, AGGREGATES, "l, g)")
    check("let l: f32" in text, "hover on a name bound by a tuple pattern: its type", text)
    text = hover_text(agg_uri, AGGREGATES, "g)")
    check("g.w1: Tensor f32 [8, 16] on Pod with {1: model}" in text and "g.w2:" in text,
          "hover on a struct bound by a tuple pattern (a gradient): its leaves", text)
    c.notify("textDocument/didClose", {"textDocument": {"uri": agg_uri}})

    et_uri = open_checked("element_types.msh", ELEMENT_TYPES, "the element-type program checks")
    text = hover_text(et_uri, ELEMENT_TYPES, "T [4] on Pod, s")
    check("element type (`Float`) `T`" in text and "T = bf16" in text and "T = f32" in text,
          "hover on a generic element type: its kind and its instances' types", text)
    c.notify("textDocument/didClose", {"textDocument": {"uri": et_uri}})

    eff_uri = open_checked("effects.msh", EFFECTS, "the effects program checks")
    text = hover_text(eff_uri, EFFECTS, "row(h: T")
    check("! comm(model <= 4 * B * D)" in text and "effect `! comm(model <= 128 bytes)`" in text,
          "hover on a function: its declared effect and each instance's inferred one", text)
    c.notify("textDocument/didClose", {"textDocument": {"uri": eff_uri}})

    # ------------------------------------------------------------ definition, references
    def loc_at(result):
        r = result[0] if isinstance(result, list) else result
        return r["uri"], r["range"]["start"]["line"], r["range"]["start"]["character"]

    line, col = position_of(MAIN, "mlp(x, w1, w2)")
    got = c.at("textDocument/definition", main_uri, line, col)
    want = position_of(MAIN, "mlp(x:")
    check(got and loc_at(got) == (main_uri, *want), "definition of a function", got)

    line, col = position_of(MAIN, "h @ w2")
    got = c.at("textDocument/definition", main_uri, line, col)
    check(got and loc_at(got) == (main_uri, *position_of(MAIN, "h = relu")), "definition of a variable", got)

    line, col = position_of(MAIN, "{B: data}", delta=4)
    got = c.at("textDocument/definition", main_uri, line, col)
    check(got and loc_at(got) == (main_uri, *position_of(MAIN, "data: 2")), "definition of a mesh axis", got)

    line, col = position_of(MAIN, "on Pod", delta=3)
    got = c.at("textDocument/definition", main_uri, line, col)
    check(got and loc_at(got) == (main_uri, *position_of(MAIN, "Pod =")), "definition of a mesh", got)

    line, col = position_of(MAIN, "[B, D]", delta=1)
    got = c.at("textDocument/definition", main_uri, line, col)
    check(got and loc_at(got) == (main_uri, line, col), "definition of a size variable (its first occurrence)", got)

    line, col = position_of(MAIN, "w1: Tensor")
    refs = c.at("textDocument/references", main_uri, line, col, context={"includeDeclaration": True})
    check(len(refs) == 2, "references of parameter w1 (declaration and one use)", refs)
    line, col = position_of(MAIN, "model: 4")
    refs = c.at("textDocument/references", main_uri, line, col, context={"includeDeclaration": False})
    check(len(refs) == 2, "references of mesh axis `model` (two layouts)", refs)

    # ------------------------------------------------------------ symbols, hints, tokens
    syms = c.request("textDocument/documentSymbol", {"textDocument": {"uri": main_uri}})
    names = [s["name"] for s in syms]
    check(names == ["Pod", "mlp", "main"], "documentSymbol: the items", names)
    check([s["name"] for s in syms[0].get("children", [])] == ["data", "model"], "documentSymbol: mesh axes", syms[0])

    hints = c.request("textDocument/inlayHint", {"textDocument": {"uri": main_uri},
                                                 "range": {"start": {"line": 0, "character": 0},
                                                           "end": {"line": 100, "character": 0}}})
    labels = {(h["position"]["line"], h["position"]["character"]): h["label"] for h in hints}
    hl, hc = position_of(MAIN, "h = relu")
    check(labels.get((hl, hc + 1)) == ": Tensor f32 [8, 32] on Pod with {0: data, 1: model}",
          "inlayHint after `let h`", hints)
    check(len(hints) == 5, "inlayHint: one per unannotated let (h, x, w1, w2, y)", hints)

    toks = c.request("textDocument/semanticTokens/full", {"textDocument": {"uri": main_uri}})
    data = toks["data"]
    check(len(data) > 50 and len(data) % 5 == 0, "semanticTokens/full: encoded tokens", len(data))
    legend = caps["semanticTokensProvider"]["legend"]["tokenTypes"]
    # Decode and find the token at `fn mlp` (the function name, a declaration).
    decoded, line, char = [], 0, 0
    for i in range(0, len(data), 5):
        dl, dc, length, typ, mods = data[i:i + 5]
        line += dl
        char = char + dc if dl == 0 else dc
        decoded.append((line, char, length, legend[typ], mods))
    ml, mc = position_of(MAIN, "mlp(x:")
    check((ml, mc, 3, "function", 1) in decoded, "semantic token: `mlp` is a function declaration", decoded[:12])
    al, ac = position_of(MAIN, "{H: model}", delta=4)
    check(any(t[:4] == (al, ac, 5, "enumMember") for t in decoded), "semantic token: a mesh axis is an enumMember")

    # ------------------------------------------------------------ code actions
    line, col = position_of(MAIN, "h @ w2")
    actions = c.request("textDocument/codeAction", {"textDocument": {"uri": main_uri},
                                                    "range": {"start": {"line": line, "character": col},
                                                              "end": {"line": line, "character": col + 6}},
                                                    "context": {"diagnostics": []}})
    edits = [e["newText"] for a in actions for e in a["edit"]["changes"].get(main_uri, [])]
    check("reshard(h @ w2, {0: data})" in edits, "codeAction: make the inserted all_reduce explicit", actions)

    c.open(strict_uri, STRICT, 1)
    diags = c.diagnostics(strict_uri, 1)
    check(len(diags) == 1 and diags[0]["code"] == "E0406", "@explicit_comm: E0406", diags)
    if diags:
        rng = diags[0]["range"]
        actions = c.request("textDocument/codeAction", {"textDocument": {"uri": strict_uri}, "range": rng,
                                                        "context": {"diagnostics": diags}})
        fix = [a for a in actions if a.get("diagnostics")]
        check(fix and fix[0]["edit"]["changes"][strict_uri][0]["newText"] == "reshard(x * 2.0, {})",
              "codeAction for E0406 inserts the reshard it asks for", actions)
        fixed = STRICT.replace("    x * 2.0\n", "    reshard(x * 2.0, {})\n")
        c.change_full(strict_uri, fixed, 2)
        check(c.diagnostics(strict_uri, 2) == [], "after the quick fix, no E0406")

    # Every quick fix offered for an E0406 must remove that diagnostic and add none: it
    # converts the value the construct uses (`v` in `x @ v`, each `y` of `y * y`), or the
    # construct's own value where that is what is converted (to the result type).
    pending_path = work / "pending.msh"
    pending_path.write_text(PENDING)
    pending_uri = uri_of(pending_path)
    text, version = PENDING, 1
    c.open(pending_uri, text, version)
    diags = c.diagnostics(pending_uri, version)
    check(diags and all(x["code"] == "E0406" for x in diags), "@explicit_comm: E0406", diags)
    for round_ in range(4):
        if not diags:
            break
        d = diags[0]
        actions = c.request("textDocument/codeAction", {"textDocument": {"uri": pending_uri}, "range": d["range"],
                                                        "context": {"diagnostics": [d]}})
        fix = [a for a in actions if a.get("diagnostics") and a["diagnostics"][0]["message"] == d["message"]]
        check(len(fix) == 1, f"E0406 `{d['message']}`: one quick fix", actions)
        if not fix:
            break
        text = apply_edits(text, fix[0]["edit"]["changes"][pending_uri])
        version += 1
        c.change_full(pending_uri, text, version)
        after = c.diagnostics(pending_uri, version)
        check(all(x["code"] == "E0406" for x in after) and len(after) < len(diags) and
              not any(x["range"] == d["range"] and x["message"] == d["message"] for x in after),
              f"the quick fix for `{d['message']}` removes it and adds nothing", (text, after))
        diags = after
    check(diags == [], "after the quick fixes, no E0406 left", (text, diags))
    check("x @ reshard(v, {0: data})" in text and "reshard(y, {}) * reshard(y, {})" in text,
          "the quick fixes wrap the converted values, not the constructs", text)

    # ------------------------------------------------------------ with auto
    # Hover on `auto` shows the layout `meshc shard` chooses and why; a code action writes
    # it in. The expected layout comes from `meshc shard` itself, run here.
    import json as _json
    import subprocess as _subprocess
    auto_path = work / "auto.msh"
    auto_path.write_text(AUTO)
    auto_uri = uri_of(auto_path)
    shard = _json.loads(_subprocess.run([args.meshc, "shard", "--format=json", "--stdlib", args.stdlib, str(auto_path)],
                                        capture_output=True, text=True, check=True).stdout)
    want = shard["sites"][0]["layout"]
    c.open(auto_uri, AUTO, 1)
    diags = c.diagnostics(auto_uri, 1)
    check(diags == [], "a program with `with auto` has no diagnostics", diags)
    al, ac = position_of(AUTO, "auto,", delta=1)
    hv = c.at("textDocument/hover", auto_uri, al, ac)
    text = hv["contents"]["value"] if hv else ""
    check(f"`with {want}`" in text and "field `w1` of `W`" in text and "the best plan with" in text,
          "hover on `auto`: the solved layout and why", text)
    actions = c.request("textDocument/codeAction", {"textDocument": {"uri": auto_uri},
                                                    "range": {"start": {"line": al, "character": ac},
                                                              "end": {"line": al, "character": ac}},
                                                    "context": {"diagnostics": []}})
    edits = [e["newText"] for a in actions for e in a["edit"]["changes"].get(auto_uri, [])]
    check(edits == [want], "codeAction on `auto`: writes the solved layout", actions)
    no_main = AUTO[:AUTO.index("fn main()")]
    c.change_full(auto_uri, no_main, 2)
    diags = c.diagnostics(auto_uri, 2)
    check(len(diags) == 1 and diags[0]["code"] == "E0711", "`auto` without `main`: E0711 in the editor too", diags)

    # ------------------------------------------------------------ malformed input, failures
    c.send_raw(b"Content-Length: 9\r\n\r\n{not json")
    m = c.wait(lambda m: m.get("error", {}).get("code") == -32700)
    check(m["id"] is None, "invalid JSON: ParseError with id null")
    c.send_raw(b"X-Nonsense: 1\r\n\r\n")
    c.wait(lambda m: m.get("error", {}).get("code") == -32700)
    check(True, "a header block without Content-Length: ParseError, and the server reads on")
    c.send_raw(b"Content-Length: abc\r\n\r\n")
    c.wait(lambda m: m.get("error", {}).get("code") == -32700)
    c.send_raw(b"X" * (1 << 20) + b"\r\n\r\n")
    c.wait(lambda m: "8 KiB" in m.get("error", {}).get("message", ""))
    check(True, "a 1 MiB header line: ParseError, and the server reads on")
    c.send_raw(b"Content-Length: 2\r\n\r\n[]")
    m = c.wait(lambda m: m.get("error", {}).get("code") == -32600)
    check(True, "a non-object message: InvalidRequest")
    m = c.response(c.request_async("textDocument/noSuchThing", {}))
    check(m.get("error", {}).get("code") == -32601, "unknown method: MethodNotFound", m)
    m = c.response(c.request_async("textDocument/hover", {"textDocument": {"uri": main_uri}}))
    check(m.get("error", {}).get("code") == -32602, "hover without a position: InvalidParams", m)
    m = c.response(c.request_async("textDocument/hover", {"textDocument": {"uri": "http://x/y.msh"},
                                                          "position": {"line": 0, "character": 0}}))
    check("error" in m, "hover on a non-file URI: an error", m)
    m = c.response(c.request_async("meshc/debugFail", {}))
    check(m.get("error", {}).get("code") == -32603, "an internal failure in a handler: InternalError", m)
    hv = c.at("textDocument/hover", main_uri, *position_of(MAIN, "h @ w2", delta=2))
    check(hv is not None, "the server still answers after all that")
    hv = c.at("textDocument/hover", main_uri, 1000, 1000)
    check(True, "hover past the end of the file answers", hv)

    # ------------------------------------------------------------ edit storm
    # 300 one-character incremental edits without waiting, then the last version's
    # diagnostics must reflect the final text.
    text = MAIN
    version = 10
    line, col = position_of(MAIN, "sum(z)", delta=5)
    for i in range(300):
        version += 1
        if i % 2 == 0:
            c.change_range(main_uri, version, (line, col), (line, col), "q")
        else:
            c.change_range(main_uri, version, (line, col), (line, col + 1), "")
    version += 1
    c.change_range(main_uri, version, (line, col), (line, col), "q")  # `zq`: unknown
    diags = c.diagnostics(main_uri, version, timeout=120)
    check(len(diags) == 1 and diags[0]["code"] == "E0201" and "zq" in diags[0]["message"],
          "edit storm: the last version's diagnostics", diags)
    version += 1
    c.change_range(main_uri, version, (line, col), (line, col + 1), "")
    check(c.diagnostics(main_uri, version) == [], "edit storm: undone, clean again")
    hv = c.at("textDocument/hover", main_uri, *position_of(MAIN, "h @ w2", delta=2))
    check(hv is not None and "all_reduce" in hv["contents"]["value"], "hover right after the storm")

    # ------------------------------------------------------------ the standard library
    stdlib_nn = pathlib.Path(args.stdlib) / "std" / "nn.msh"
    nn_uri = uri_of(stdlib_nn)
    c.open(nn_uri, stdlib_nn.read_text(), 1)
    diags = c.diagnostics(nn_uri, 1)
    check(diags == [], "a stdlib file checks like any other", diags)
    nn_text = stdlib_nn.read_text()
    got = c.at("textDocument/definition", nn_uri, *position_of(nn_text, "M.model"))
    check(got and loc_at(got) == (nn_uri, *position_of(nn_text, "column_parallel[T: Float, M", delta=26)), "definition inside a stdlib file", got)
    c.open(std_user_uri, USES_STD, 1)
    diags = c.diagnostics(std_user_uri, 1)
    # Everything is replicated over `data`: W0001 (a warning, severity 2) at the call of
    # the library function, in the user's file, not inside std/nn.msh.
    check(len(diags) == 1 and diags[0]["code"] == "W0001" and diags[0]["severity"] == 2 and
          diags[0]["range"]["start"]["line"] == 7 and "`data` splits nothing in `linear` (called here)" in diags[0]["message"],
          "a program importing std.nn checks (one warning, at the call)", diags)
    got = c.at("textDocument/definition", std_user_uri, *position_of(USES_STD, "linear(", delta=1))
    check(got and loc_at(got)[0] == nn_uri and loc_at(got)[1] == position_of(nn_text, "fn linear")[0],
          "definition of an imported function goes to the stdlib file", got)
    got = c.at("textDocument/definition", std_user_uri, *position_of(USES_STD, "std.nn", delta=5))
    check(got and loc_at(got) == (nn_uri, 0, 0), "definition on an import path opens the module", got)
    hv = c.at("textDocument/hover", std_user_uri, *position_of(USES_STD, "linear(", delta=1))
    check(hv and "Affine map on tokens" in hv["contents"]["value"], "hover on an imported function shows its doc")
    # Editing the imported module (unsaved) changes the importer's diagnostics.
    c.change_full(nn_uri, nn_text.replace("fn linear[", "fn linear_renamed["), 2)
    diags = c.diagnostics(std_user_uri, None)
    check(any(d["code"] == "E0201" for d in diags), "an unsaved edit of an imported module reaches its importer", diags)
    c.notify("textDocument/didClose", {"textDocument": {"uri": nn_uri}})

    # UTF-16 positions (the default): an incremental edit after a non-BMP character.
    wide_uri = uri_of(work / "wide.msh")
    wide = 'fn main() {\n    print("\u00fc\U0001F600", 1);\n}\n'
    c.open(wide_uri, wide, 1)
    check(c.diagnostics(wide_uri, 1) == [], "a file with non-ASCII strings checks")
    line1 = wide.split("\n")[1]
    units = lambda text: len(text.encode("utf-16-le")) // 2
    at = units(line1[:line1.index(", 1")])
    c.change_range(wide_uri, 2, (1, at + 2), (1, at + 3), "nope")  # `1` -> `nope`
    diags = c.diagnostics(wide_uri, 2)
    want = {"line": 1, "character": at + 2}
    check(len(diags) == 1 and diags[0]["range"]["start"] == want and "nope" in diags[0]["message"],
          "UTF-16: incremental edit and diagnostic range after an emoji", diags)
    c.notify("textDocument/didClose", {"textDocument": {"uri": wide_uri}})

    # An error inside an imported module is shown at the import.
    (work / "helper.msh").write_text("fn twice(x: Tensor f32 [4]) -> Tensor f32 [4] {\n    x * two\n}\n")
    user = "import helper;\n\nfn main() {\n    print(\"s\", sum(helper.twice(zeros([4]))));\n}\n"
    user_uri = uri_of(work / "user.msh")
    c.open(user_uri, user, 1)
    diags = c.diagnostics(user_uri, 1)
    check(len(diags) == 1 and diags[0]["range"]["start"]["line"] == 0 and "helper.msh:2:9" in diags[0]["message"],
          "an error in an imported file is shown at the import", diags)

    # A document over the source size limit is E0111, like a file on disk.
    big_uri = uri_of(work / "big.msh")
    c.open(big_uri, "// " + "x" * (16 << 20) + "\n", 1)
    diags = c.diagnostics(big_uri, 1, timeout=120)
    check(len(diags) == 1 and diags[0]["code"] == "E0111", "an oversized document: E0111", [d["code"] for d in diags])
    c.notify("textDocument/didClose", {"textDocument": {"uri": big_uri}})
    check(c.diagnostics(big_uri, None) == [], "didClose clears the document's diagnostics")

    status = c.close()
    check(status == 0, "shutdown + exit: exit status 0", status)

    # exit without shutdown is status 1; end of input likewise.
    c2 = LspClient(args.meshc)
    c2.notify("exit")
    check(c2.proc.wait(timeout=30) == 1, "exit without shutdown: status 1")
    c3 = LspClient(args.meshc)
    c3.proc.stdin.close()
    check(c3.proc.wait(timeout=30) == 1, "end of input: status 1")

    # UTF-8 positions when the client offers them.
    c4 = LspClient(args.meshc, ["--stdlib", args.stdlib])
    init = c4.initialize(encodings=["utf-8", "utf-16"])
    check(init["capabilities"].get("positionEncoding") == "utf-8", "utf-8 positions when offered")
    wide = "// ünïcödé\n" + MAIN
    c4.open(main_uri, wide, 1)
    c4.diagnostics(main_uri, 1)
    line, col = position_of(wide, "h @ w2")
    got = c4.at("textDocument/definition", main_uri, line, col)
    check(got and loc_at(got)[1:] == position_of(wide, "h = relu"), "definition with utf-8 positions", got)
    c4.close()

    shutil.rmtree(work, ignore_errors=True)
    print(f"lsp: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
