"""Options shared by several commands, each declared once (sqlite-utils' output_options habit).

A decorator here is the only declaration of its option: the name, the type, the default and
the help text are the same in every command that takes it.
"""
from __future__ import annotations

import click

from bhtcli.api import DEFAULT_STARTS, FORMATS, OUT_FORMATS

CONTEXT = {"help_option_names": ["-h", "--help"]}
# The type of every path argument and option: shell completion offers file names; the value
# stays a plain string (FILE.npz:KEY and - pass), checked and read by the library.
PATH = click.Path()

LINK_HELP = ("exp (softmax), poly:K (p_i ∝ s_i^K), taylor:K (p_i ∝ sum_{j<=K} s_i^j/j!), "
             "K even, or softcap:C (p_i ∝ exp(C tanh(s_i/C))); s = A x + bias")
LINK_DEFAULT = (" [default: the checkpoint's softcap:C when it declares final_logit_softcapping, "
                "else exp].")
INPUTS_HELP = (f"A and B are n x d matrices: {FORMATS.replace(' or ', ', ')} (FILE.npz:KEY, "
               "FILE.safetensors:TENSOR, FILE.gguf:TENSOR; FILE.gguf alone: its output layer), "
               "Hugging Face checkpoint folders (DIR: the head, DIR:TENSOR), or - for standard input.")


def _stack(*decorators):
    """One decorator applying `decorators` in the order they are listed (top to bottom)."""
    def apply(fn):
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn
    return apply


json_option = click.option(
    "--json", "as_json", is_flag=True,
    help="One JSON object on stdout instead of tables; on failure a JSON object with error and "
         "exit_status (docs/json.md).")
seed_option = click.option(
    "--seed", type=int, default=0, show_default=True,
    help="Seed of every random choice (starting points, drawn answers); equal seeds, equal results.")
error_option = click.option(
    "--error", "alpha", type=float, default=0.05, show_default=True,
    help="Target for both error probabilities alpha (0 < ALPHA < 0.5).")
hash_option = click.option(
    "--no-hash", "no_hash", is_flag=True,
    help="Leave the SHA-256 of each file read out of the run record (--json: run.files[].sha256 "
         "null). Hashing reads every byte of every input file once more, checkpoints whole: about "
         "0.1 s per 100 MB from the page cache, more from disk (docs/json.md, The run record).")
quiet_option = click.option(
    "--quiet", "-q", is_flag=True,
    help="No progress display on stderr (it only appears when stderr is a terminal).")
force_option = click.option(
    "--force", is_flag=True,
    help="Allow an output file (--out, --export, --plot) to replace one of the command's input files.")
model_option = click.option(
    "--model", type=click.Choice(["softmax", "leverage"]), default="softmax", show_default=True,
    help="softmax: answers ~ softmax(Ax), query x; leverage: answers ~ leverage scores of S^-1 A, query s.")
floor_option = click.option(
    "--floor", type=float, default=None,
    help="Leverage models only (required there): the box is FLOOR <= s_i^2 <= ENERGY.")
class OneBudget(click.ParamType):
    """--energy of the commands that take one budget: a float; a comma list gets one clear
    error (budget lists are design's)."""

    name = "float"

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        try:
            return float(value)
        except ValueError:
            if "," in str(value):
                self.fail(f"{value!r}: this command takes one budget; a comma list of budgets "
                          "(0.5,1,2,4) is for bht design (the budget curve)", param, ctx)
            self.fail(f"{value!r} is not a number", param, ctx)


def energy_option(required: bool = True):
    """--energy/-E of the commands that take one budget (rank's is optional)."""
    return click.option(
        "--energy", "-E", type=OneBudget(), default=None,
        help="softmax: budget on ||x||_2; leverage: upper bound C on every s_i^2"
             + (" [required]." if required else "; rows of H outside it are not eligible [default: every row]."))
dtype_option = click.option(
    "--dtype", type=click.Choice(["float64", "float32"]), default="float64", show_default=True,
    help="Precision of the products with A and B (float32: half the memory); reported numbers "
         "are recomputed in float64.")


def query_option(required: bool, what: str = "The query"):
    """-x/--query: a query vector x (softmax) or s (leverage) in any matrix format."""
    return click.option(
        "--query", "-x", type=PATH, required=required, default=None, metavar="FILE",
        help=f"{what}: x (softmax) or s (leverage), in any input format (e.g. the file of "
             "design --out).")


def out_option(what: str, required: bool = False):
    """--out FILE, its format chosen by the extension (the same four for every command)."""
    return click.option(
        "--out", type=click.Path(dir_okay=False), required=required, metavar="FILE",
        help=f"Write {what} to FILE, in the format its extension names: {OUT_FORMATS}.")


readout_options = _stack(
    click.option("--link-a", default=None, metavar="LINK",
                 help="Link of model A: " + LINK_HELP + LINK_DEFAULT),
    click.option("--link-b", default=None, metavar="LINK",
                 help="Link of model B (as --link-a)."),
    click.option("--bias-a", type=PATH, default=None, metavar="FILE",
                 help="Bias of model A, one entry per row (any input format, e.g. F.safetensors:lm_head.bias)."),
    click.option("--bias-b", type=PATH, default=None, metavar="FILE", help="Bias of model B (as --bias-a)."),
)

# K models (M3 ...): one read-out per model, in their order (two models: as --link-a .. --bias-b)
model_readout_options = _stack(
    click.option("--links", default=None, metavar="L1,L2,...",
                 help="With a list of models: the link of each, in their order (e.g. "
                      "exp,softcap:30,exp; as --link-a) [default: each checkpoint's softcap:C when it "
                      "declares final_logit_softcapping, else exp]."),
    click.option("--biases", default=None, metavar="F1,F2,...",
                 help="With a list of models: the bias file of each, in their order; an empty "
                      "entry is no bias (e.g. ,b2.npy,)."),
)


def _pair_options(energy):
    """A, B, --model, the given --energy, --floor, --error and the readout options."""
    return _stack(click.argument("a", metavar="A", type=PATH), click.argument("b", metavar="B", type=PATH),
                  model_option,
                  energy, floor_option, error_option, readout_options)


model_pair_options = _pair_options(energy_option())
rank_pair_options = _pair_options(energy_option(required=False))
# design's --energy also takes a comma list of budgets (the budget curve)
design_pair_options = _pair_options(click.option(
    "--energy", "-E", type=str, default=None, metavar="E[,E2,...]",
    help="softmax: budget on ||x||_2; leverage: upper bound C on every s_i^2; an increasing comma "
         "list (0.5,1,2,4) gives one design per budget [required; optional with --candidates]."))

starts_option = click.option(
    "--starts", type=int, default=None,
    help=f"Exactly this many starting points [design's default: adaptive rounds of {DEFAULT_STARTS} and more "
         "(see --max-starts); simulate's: 32; leverage: 6, or 3 when n*d^2 > 1e7].")


# The sampler an API runs (llama.cpp's chain: top-k, top-p, min-p, temperature) and the engine.
sampler_options = _stack(
    click.option("--temperature", type=float, default=1.0, show_default=True,
                 help="Sampler temperature (0: greedy), applied after the truncations."),
    click.option("--top-k", type=int, default=0, show_default=True, help="Keep the K most probable tokens (0: off)."),
    click.option("--top-p", type=float, default=1.0, show_default=True,
                 help="Keep the most probable tokens up to cumulative probability P (1: off)."),
    click.option("--min-p", type=float, default=0.0, show_default=True,
                 help="Keep tokens with probability >= M x the largest (0: off)."))
engine_options = _stack(
    click.option("--threads", type=int, default=2, show_default=True, help="Engine threads."),
    click.option("--batch", type=int, default=512, show_default=True,
                 help="Engine physical batch (ubatch) in tokens."),
    click.option("--kv-type", type=click.Choice(["f16", "f32"]), default="f16", show_default=True,
                 help="Type of the engine's KV cache."),
    click.option("--flash-attn/--no-flash-attn", default=False, show_default=True,
                 help="Flash attention in the engine."),
    click.option("--sequences", type=int, default=16, show_default=True,
                 help="Prompts per engine call."))
