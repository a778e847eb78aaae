#!/usr/bin/env python3
"""Rebuild recipes.csv: for every Megatron-Bridge row of ../data/nvidia_perf.csv, the settings of the benchmark
recipe that produced it (recompute, BF16 layers, MoE dispatcher and EP overlap, MTP, offloading), read from the
recipe code at the git tag of the row's release (recipes.md: the release -> tag mapping and the override chain).

    python3 configs/validation/recipes/derive_recipes.py /path/to/Megatron-Bridge/.git

It interprets the recipe modules' assignments at that tag (ast, no import of Megatron-Bridge) in execution order;
what it cannot follow (model providers built from Hugging Face configs, GPU queries) is left empty with a note.
Release 25.09's runner (YAML + per-model code) is not followed: recipes.md has its facts, read by hand.
"""
import ast, csv, os, re, subprocess, sys


class Unknown(Exception): pass
class _U:
    def __repr__(self): return 'UNKNOWN'
UNK = _U()
class Obj(dict):
    auto = False
class UObj(Obj):
    """Result of a call we cannot follow (e.g. a model provider built by AutoBridge): attributes assigned
    to it are still recorded; reading a missing attribute gives another UObj; its truth value is unknown."""
class Ret(Exception):
    def __init__(s, v): s.v = v

class Interp:
    def __init__(self, git, tag, emul, roots):
        self.git, self.tag, self.emul, self.roots = git, tag, emul, roots
        self.mods = {}; self.notes = []; self.trace = []; self.depth = 0
    _cache = {}
    def src(self, path):
        k = (self.tag, path)
        if k not in Interp._cache: Interp._cache[k] = self._src(path)
        return Interp._cache[k]
    def _src(self, path):
        try:
            return subprocess.run(['git', '-C', self.git, 'show', f'{self.tag}:{path}'], capture_output=True, text=True, check=True).stdout
        except subprocess.CalledProcessError:
            return None
    def module(self, path):
        if path not in self.mods:
            s = self.src(path)
            if s is None: self.mods[path] = None
            else:
                t = ast.parse(s); defs = {}; imports = {}; consts = {}
                def flat(body):
                    for st in body:
                        if isinstance(st, (ast.If, ast.Try)):
                            yield from flat(st.body)
                            yield from flat(getattr(st, 'orelse', []))
                            for h in getattr(st, 'handlers', []): pass
                        else: yield st
                for st in flat(t.body):
                    if isinstance(st, ast.FunctionDef): defs[st.name] = st
                    elif isinstance(st, ast.ImportFrom):
                        for a in st.names: imports[a.asname or a.name] = (st.module, st.level, a.name)
                    elif isinstance(st, ast.Import):
                        for a in st.names: imports[a.asname or a.name] = (a.name, 0, None)
                    elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                        consts[st.targets[0].id] = st.value
                self.mods[path] = (defs, imports, consts)
        return self.mods[path]
    def modpath(self, frompath, module, level):
        cands = []
        if level:
            base = frompath.rsplit('/', level)[0]
            rel = (module or '').replace('.', '/')
            p = base + ('/' + rel if rel else '')
            cands = [p + '.py', p + '/__init__.py']
        else:
            rel = module.replace('.', '/')
            for r in self.roots: cands += [r + rel + '.py', r + rel + '/__init__.py']
        for c in cands:
            if self.module(c) is not None: return c
        return None
    def resolve(self, path, name, seen=0):
        m = self.module(path)
        if m is None or seen > 6: return None
        defs, imports, consts = m
        if name in defs: return ('def', path, defs[name])
        if name in imports:
            mod, lvl, orig = imports[name]
            if orig is None: return None
            if not mod:
                p2 = self.modpath(path, orig, lvl)
                if p2: return ('mod', p2, None)
            p = self.modpath(path, mod, lvl)
            if p is None: return None
            r = self.resolve(p, orig, seen + 1)
            if r is None:
                # maybe a submodule
                p2 = self.modpath(path, (mod + '.' if mod else '') + orig, lvl)
                if p2: return ('mod', p2, None)
            return r
        if name in consts: return ('const', path, consts[name])
        return None

    # ---------------- evaluation
    def ev(self, n, env, path):
        E = lambda x: self.ev(x, env, path)
        if isinstance(n, ast.Constant): return n.value
        if isinstance(n, ast.Name):
            if n.id in env: return env[n.id]
            if n.id in ('None', 'True', 'False'): return {'None': None, 'True': True, 'False': False}[n.id]
            r = self.resolve(path, n.id)
            if r and r[0] == 'def': return ('fn', r[1], r[2])
            if r and r[0] == 'mod': return ('mod', r[1])
            if r and r[0] == 'const':
                try: return self.ev(r[2], {}, r[1])
                except Exception: return UNK
            return ('name', n.id)
        if isinstance(n, (ast.List, ast.Tuple)): return [E(e) for e in n.elts]
        if isinstance(n, ast.Set): return set(E(e) for e in n.elts)
        if isinstance(n, ast.Dict):
            d = {}
            for k, v in zip(n.keys, n.values):
                vv = E(v)
                if k is None:
                    if isinstance(vv, dict): d.update(vv)
                else:
                    kk = E(k)
                    try: d[kk] = vv
                    except TypeError: pass
            return d
        if isinstance(n, ast.JoinedStr): return UNK
        if isinstance(n, ast.Attribute):
            b = E(n.value)
            if isinstance(b, Obj):
                if n.attr in b: return b[n.attr]
                o = UObj() if isinstance(b, UObj) else Obj(); o.auto = True; b[n.attr] = o; return o
            if isinstance(b, tuple) and b[0] == 'mod':
                r = self.resolve(b[1], n.attr)
                if r and r[0] == 'def': return ('fn', r[1], r[2])
                if r and r[0] == 'const':
                    try: return self.ev(r[2], {}, r[1])
                    except Exception: return UNK
                return UNK
            if isinstance(b, str) and n.attr in ('upper', 'lower', 'startswith', 'endswith'):
                return ('meth', b, n.attr)
            return UNK
        if isinstance(n, ast.Subscript):
            b = E(n.value); i = E(n.slice)
            try: return b[i]
            except Exception: return UNK
        if isinstance(n, ast.UnaryOp):
            v = E(n.operand)
            if isinstance(n.op, ast.Not): return not self.truth(v)
            if isinstance(n.op, ast.USub) and isinstance(v, (int, float)): return -v
            return UNK
        if isinstance(n, ast.BoolOp):
            if isinstance(n.op, ast.And):
                for x in n.values:
                    v = E(x)
                    if not self.truth(v): return v
                return v
            for x in n.values:
                v = E(x)
                if self.truth(v): return v
            return v
        if isinstance(n, ast.IfExp):
            return E(n.body) if self.truth(E(n.test)) else E(n.orelse)
        if isinstance(n, ast.Compare):
            l = E(n.left)
            for op, rn in zip(n.ops, n.comparators):
                r = E(rn)
                if isinstance(op, (ast.Is, ast.IsNot)):
                    ln = l is None or (isinstance(l, Obj) and l.auto and not l and not isinstance(l, UObj))
                    if r is None: res = ln
                    else: res = l is r
                    if l is UNK or isinstance(l, UObj): raise Unknown('is on unknown')
                    if isinstance(op, ast.IsNot): res = not res
                else:
                    if l is UNK or r is UNK or isinstance(l, (Obj, UObj)) and (l.auto or isinstance(l, UObj)) or isinstance(r, Obj) and (r.auto or isinstance(r, UObj)):
                        raise Unknown('compare unknown')
                    if isinstance(op, ast.Eq): res = l == r
                    elif isinstance(op, ast.NotEq): res = l != r
                    elif isinstance(op, ast.In): res = l in (r or [])
                    elif isinstance(op, ast.NotIn): res = l not in (r or [])
                    elif isinstance(op, ast.Gt): res = l > r
                    elif isinstance(op, ast.GtE): res = l >= r
                    elif isinstance(op, ast.Lt): res = l < r
                    elif isinstance(op, ast.LtE): res = l <= r
                    else: raise Unknown('cmp')
                if not res: return False
                l = r
            return True
        if isinstance(n, ast.BinOp):
            a, b = E(n.left), E(n.right)
            try:
                if isinstance(n.op, ast.Add): return a + b
                if isinstance(n.op, ast.Mult): return a * b
                if isinstance(n.op, ast.Sub): return a - b
                if isinstance(n.op, ast.FloorDiv): return a // b
                if isinstance(n.op, ast.Div): return a / b
                if isinstance(n.op, ast.Mod): return a % b
            except Exception: return UNK
            return UNK
        if isinstance(n, ast.Call): return self.call(n, env, path)
        return UNK

    def truth(self, v):
        if v is UNK or isinstance(v, UObj): raise Unknown('truth of unknown')
        if isinstance(v, Obj): return bool(v) if v.auto else True
        if isinstance(v, tuple): raise Unknown('truth of name')
        return bool(v)

    def call(self, n, env, path):
        f = self.ev(n.func, env, path)
        args = []
        for a in n.args:
            if isinstance(a, ast.Starred): return UNK
            args.append(self.ev(a, env, path))
        kw = {}
        for k in n.keywords:
            v = self.ev(k.value, env, path)
            if k.arg is None:
                if isinstance(v, dict): kw.update(v)
            else: kw[k.arg] = v
        fname = None
        if isinstance(f, tuple) and f[0] == 'fn': fname = f[2].name
        elif isinstance(f, tuple) and f[0] == 'name': fname = f[1]
        elif isinstance(n.func, ast.Attribute): fname = n.func.attr
        if fname in self.emul:
            r = self.emul[fname](self, args, kw)
            if r is not NotImplemented: return r
        if isinstance(f, tuple) and f[0] == 'meth':
            s, m = f[1], f[2]
            return getattr(s, m)(*args)
        if isinstance(f, tuple) and f[0] == 'fn':
            return self.run(f[1], f[2], args, kw)
        if fname in ('bool',): return bool(args[0]) if args and args[0] is not UNK else UNK
        if fname in ('int',): return int(args[0]) if args and isinstance(args[0], (int, float, str)) else UNK
        if fname == 'hasattr': return True
        if fname == 'getattr':
            o = args[0]
            if isinstance(o, Obj) and args[1] in o and not (isinstance(o[args[1]], Obj) and o[args[1]].auto):
                return o[args[1]]
            return args[2] if len(args) > 2 else UNK
        if fname == 'isinstance':
            t = args[1] if len(args) > 1 else None
            py = {'str': str, 'list': list, 'dict': dict, 'bool': bool, 'int': int, 'float': float, 'tuple': tuple}
            if isinstance(t, tuple) and t[0] == 'name' and t[1] in py: return isinstance(args[0], py[t[1]])
            if isinstance(t, list) and all(isinstance(x, tuple) and x[0] == 'name' and x[1] in py for x in t):
                return isinstance(args[0], tuple(py[x[1]] for x in t))
            return True
        if fname == 'len':
            try: return len(args[0])
            except Exception: return UNK
        if fname in ('list', 'tuple'): return list(args[0]) if args and isinstance(args[0], (list, tuple)) else UNK
        if fname in ('dict',): return dict(kw)
        if fname in ('info', 'warning', 'debug', 'error', 'print', 'warn'): return None
        if isinstance(f, tuple) and f[0] == 'name' and f[1][:1].isupper() or (isinstance(n.func, ast.Name) and n.func.id[:1].isupper()):
            o = Obj(kw); return o  # constructor of an external class: record its kwargs
        return UObj()

    def run(self, path, fdef, args, kw):
        if self.depth > 25: return UNK
        env = {}
        a = fdef.args
        params = [p.arg for p in a.posonlyargs + a.args]
        defaults = a.defaults
        for i, p in enumerate(params):
            di = i - (len(params) - len(defaults))
            if i < len(args): env[p] = args[i]
            elif p in kw: env[p] = kw.pop(p)
            elif di >= 0:
                try: env[p] = self.ev(defaults[di], {}, path)
                except Unknown: env[p] = UNK
            else: env[p] = UNK
        for p, d in zip(a.kwonlyargs, a.kw_defaults):
            if p.arg in kw: env[p.arg] = kw.pop(p.arg)
            elif d is not None: env[p.arg] = self.ev(d, {}, path)
            else: env[p.arg] = UNK
        if a.kwarg: env[a.kwarg.arg] = dict(kw)
        self.trace.append(f'{path}::{fdef.name}')
        self.depth += 1
        try:
            self.block(fdef.body, env, path)
        except Ret as r:
            return r.v
        finally:
            self.depth -= 1
        return None

    def assign(self, t, v, env, path):
        if isinstance(t, ast.Name): env[t.id] = v
        elif isinstance(t, ast.Attribute):
            b = self.ev(t.value, env, path)
            if isinstance(b, Obj):
                if v is UNK: v = UObj()
                b[t.attr] = v
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts: self.assign(e, UNK, env, path)

    def block(self, body, env, path):
        for st in body:
            try:
                self.stmt(st, env, path)
            except Ret:
                raise
            except Unknown:
                self.notes.append(f'unresolved value {path}:{st.lineno}')
            except RecursionError:
                raise
            except Exception as e:
                self.notes.append(f'interp error {path}:{st.lineno} {type(e).__name__}')

    def stmt(self, st, env, path):
        if True:
            if isinstance(st, ast.Return):
                raise Ret(self.ev(st.value, env, path) if st.value is not None else None)
            if isinstance(st, ast.Assign):
                v = self.ev(st.value, env, path)
                for t in st.targets: self.assign(t, v, env, path)
            elif isinstance(st, ast.AnnAssign) and st.value is not None:
                self.assign(st.target, self.ev(st.value, env, path), env, path)
            elif isinstance(st, ast.Expr):
                if isinstance(st.value, ast.Call): self.ev(st.value, env, path)
            elif isinstance(st, ast.If):
                try:
                    c = self.truth(self.ev(st.test, env, path))
                except Unknown:
                    self.notes.append(f'unresolved branch {path}:{st.lineno} ({ast.unparse(st.test)[:80]})')
                    return
                self.block(st.body if c else st.orelse, env, path)
            elif isinstance(st, (ast.With,)):
                self.block(st.body, env, path)
            elif isinstance(st, ast.Try):
                self.block(st.body, env, path)
            elif isinstance(st, ast.Raise):
                raise Ret(UNK)
            elif isinstance(st, ast.For):
                it = None
                try: it = self.ev(st.iter, env, path)
                except Unknown: pass
                if isinstance(it, (list, tuple)):
                    for x in it:
                        self.assign(st.target, x, env, path); self.block(st.body, env, path)


# ---------------------------------------------------------------- emulations / driver
WBC_DEFAULTS = dict(num_gpus=1, tensor_model_parallel_size=1, pipeline_model_parallel_size=1, context_parallel_size=1,
    virtual_pipeline_model_parallel_size=None, expert_model_parallel_size=1, expert_tensor_parallel_size=None,
    global_batch_size=1, micro_batch_size=1, use_megatron_fsdp=None, nccl_ub=None, cuda_graph_impl=None,
    cuda_graph_scope=None, cpu_offloading_num_layers=None, recompute_num_layers=None, recompute_modules=None,
    moe_flex_dispatcher_backend=None, moe_a2a_overlap=False, cutedsl_fused_grouped_mlp=False,
    fp8_dot_product_attention=None, peft=None, pp_layout=None, te_precision_config_file=None)
GPU_MAJOR = {'h100': 9, 'b200': 10, 'b300': 10, 'gb200': 10, 'gb300': 10}

def make_emul(ctx):
    def wbc(it, a, kw):
        o = Obj(WBC_DEFAULTS); o.update(kw); o['_wbc'] = True; return o
    def replace(it, a, kw):
        if a and isinstance(a[0], Obj) and a[0].get('_wbc'):
            o = Obj(a[0]); o.update(kw); return o
        return NotImplemented
    def gwbc(it, a, kw):
        names = ['model_family_name', 'model_recipe_name', 'gpu', 'compute_dtype', 'task', 'config_variant']
        d = dict(zip(names, a)); d.update(kw)
        fam = d['model_family_name']; init = f'scripts/performance/configs/{fam}/__init__.py'
        base = f"{d['model_recipe_name']}_{d['task']}_config_{d['gpu']}_{d['compute_dtype']}".upper()
        v = d.get('config_variant', 'v1')
        order = [f'{base}_{v}'.upper()] + ([f'{base}_V1'] if str(v).lower() == 'v2' else []) + [base]
        if ctx.get('force_variant'): order = [f"{base}_{ctx['force_variant']}".upper(), base]
        for nm in order:
            r = it.resolve(init, nm)
            if r and r[0] == 'const':
                val = it.ev(r[2], {}, r[1])
                if isinstance(val, Obj):
                    ctx['base_name'] = f"{r[1]}::{nm}"; ctx['base'] = val; return val
        ctx['base_name'] = 'NOT FOUND: ' + '|'.join(order)
        raise Ret(None)
    def flex(it, a, kw):
        m = a[0] if a else kw.get('model_config')
        be = a[1] if len(a) > 1 else kw.get('moe_flex_dispatcher_backend')
        if not ctx['is_moe'] or not isinstance(m, Obj): return None
        gpu = ctx['gpu']; major = GPU_MAJOR[gpu]
        if be == 'deepep':
            if not (major in (8, 9) or gpu in ('b200', 'b300')):
                it.notes.append(f'apply_flex_dispatcher_backend: deepep skipped on {gpu} (runtime GPU check)'); return None
        elif be == 'hybridep':
            if major not in (8, 9, 10): return None
        else: return None
        m['moe_token_dispatcher_type'] = 'flex'; m['moe_flex_dispatcher_backend'] = be; m['moe_shared_expert_overlap'] = False
        return None
    def fullcg(it, a, kw):
        m = a[0]
        if not isinstance(m, Obj): return False
        impl = m.get('cuda_graph_impl', 'none'); sc = m.get('cuda_graph_scope')
        if impl == 'full_iteration': return True
        if impl != 'local': return False
        sc = [sc] if isinstance(sc, str) else (sc or [])
        return 'full_iteration' in sc
    unk = lambda it, a, kw: UNK
    none = lambda it, a, kw: None
    return {'WorkloadBaseConfig': wbc, 'replace': replace, 'get_workload_base_config': gwbc,
            'apply_flex_dispatcher_backend': flex, 'is_full_iteration_cuda_graph': fullcg,
            'get_rank_safe': lambda it, a, kw: 0, 'get_device_properties': unk, 'load_quantization_recipe': unk,
            'from_hf_pretrained': unk, 'makedirs': none, 'list_available_config_variants': unk,
            'create_omegaconf_dict_config': unk}

def build(GIT, tag, builder_path, builder_name, kwargs, gpu, is_moe, force_variant=None):
    ctx = {'gpu': gpu, 'is_moe': is_moe, 'force_variant': force_variant}
    it = Interp(GIT, tag, make_emul(ctx), roots=['scripts/performance/', 'src/'])
    r = it.resolve(builder_path, builder_name)
    if not r or r[0] != 'def': return None, ctx, it
    cfg = it.run(r[1], r[2], [], dict(kwargs))
    return cfg, ctx, it


# ---------------------------------------------------------------- row mapping
# Release -> Megatron-Bridge tag (evidence in recipes.md).
RELEASE_TAG = {
    '25.11': 'v0.2.0', '26.02': 'v0.3.0', '26.02.01': 'v0.3.1', '26.04': 'v0.4.0',
    '26.04.01': 'v0.4.2', '26.06': 'v0.5.0', '26.06.01': 'v0.5.1', '26.08': 'v0.6.0',
    '25.09': 'v0.1.0rc3',
}
MODEL = {  # row model -> (family dir v0.3+, recipe name, v0.2.0 family dir)
    'deepseek-v3': ('deepseek', 'deepseek_v3', 'deepseek'),
    'qwen3-30b-a3b': ('qwen', 'qwen3_30b_a3b', 'qwen3'),
    'qwen3-235b-a22b': ('qwen', 'qwen3_235b_a22b', 'qwen3'),
    'llama3-8B': ('llama', 'llama3_8b', 'llama3'),
    'llama3-70B': ('llama', 'llama3_70b', 'llama3'),
    'llama3-405B': ('llama', 'llama31_405b', 'llama31'),
    'gpt-oss-120b': ('gpt_oss', 'gpt_oss_120b', 'gpt_oss'),
    'kimi-k2': ('kimi', 'kimi_k2', None),
    'nemotron3-nano-30b-a3b': ('nemotronh', 'nemotron_3_nano', None),
    'nemotron3-super-120b-a12b': ('nemotronh', 'nemotron_3_super', None),
    'nemotron3-ultra': ('nemotronh', 'nemotron_3_ultra', None),
    'nemotron3.5-lightning': ('nemotronh', 'nemotron_3_5_lightning', None),
    'deepseek-v4-flash': ('deepseek', 'deepseek_v4_flash', None),
}
PREC = {'bf16': 'bf16', 'fp8-mx': 'fp8_mx', 'mxfp8': 'fp8_mx', 'fp8-cs': 'fp8_cs', 'fp8': 'fp8_cs',
        'nvfp4': 'nvfp4', 'fp8-blockwise': 'fp8_sc'}
GPU = {'GB200': 'gb200', 'GB300': 'gb300', 'B200': 'b200', 'B300': 'b300', 'H100-SXM-80GB': 'h100'}
COLS = ['id', 'release', 'tag', 'recipe', 'recompute_granularity', 'recompute_modules', 'recompute_method',
        'recompute_num_layers', 'bf16_layers_start', 'bf16_layers_end', 'dispatcher', 'flex_backend', 'ep_overlap',
        'mtp_layers', 'tp_comm_overlap', 'cuda_graph', 'offload', 'fp8_attention', 'token_drop', 'mismatch', 'note']


def ls_tree(git, tag, prefix):
    out = subprocess.run(['git', '-C', git, 'ls-tree', '-r', '--name-only', tag, prefix],
                         capture_output=True, text=True).stdout
    return out.split()


def find_builder(git, tag, fam, recipe, fam02, gpu, prec, n):
    if tag in ('v0.2.0', 'v0.2.1', 'v0.2.2'):
        if fam02 is None: return None
        return f'scripts/performance/configs/{fam02}/{fam02}_llm_pretrain.py', f'{recipe}_{gpu}_config', {'precision': prec}
    if tag == 'v0.6.0':
        tok = {'fp8_mx': 'fp8mx', 'fp8_cs': 'fp8cs', 'bf16': 'bf16', 'nvfp4': 'nvfp4'}[prec]
        name = f'{recipe}_pretrain_{n}gpu_{gpu}_{tok}_config'
        for p in ls_tree(git, tag, f'src/megatron/bridge/perf_recipes/{fam}/{gpu}/'):
            if p.endswith('.py') and re.search(rf'^def {name}\(', Interp(git, tag, {}, []).src(p) or '', re.M):
                return p, name, {}
        return None
    return f'scripts/performance/configs/{fam}/__init__.py', f'{recipe}_pretrain_config_{gpu}', \
        {'precision': prec, 'mock': True, 'config_variant': 'v2'}


def g(o, *path, default=None):
    for k in path:
        if not isinstance(o, dict) or k not in o: return default
        o = o[k]
    if isinstance(o, Obj) and not o and (isinstance(o, UObj) or o.auto): return default
    return o


def fmt(v):
    if v is None: return ''
    if isinstance(v, bool): return 'true' if v else 'false'
    if isinstance(v, (list, tuple)): return ';'.join(fmt(x) for x in v)
    return str(v)


# an empty table cell or an unset recipe value is the axis default; VP 1 is no virtual pipeline
LAYOUT_DEFAULTS = {'tp': 1, 'pp': 1, 'cp': 1, 'vpp': None, 'ep': 1, 'mbs': 1, 'gbs': None}


def layout_mismatches(row, layout):
    """'axis recipe=X row=Y' for each axis of `layout` ({axis: the recipe's value}) the table row disagrees with."""
    out = []
    for axis, got in layout.items():
        default = LAYOUT_DEFAULTS[axis]
        want = row[axis].strip()
        want = int(want) if want else default
        got = default if got is None else got
        same = (None if got == 1 else got) == (None if want == 1 else want) if axis == 'vpp' else got == want
        if not same: out.append(f'{axis} recipe={got} row={want}')
    return out


# Providers AutoBridge builds from the model's HF config.json at run time (the recipe calls
# AutoBridge.from_hf_pretrained, which this interpreter cannot follow): the fields the bridge copies from the config
# that the recipe leaves alone. DeepSeek-V4-Flash: models/deepseek/deepseek_v4_bridge.py sets
# provider.mtp_num_layers = num_nextn_predict_layers, 1 in its config.json (configs/models/deepseek-v4-flash.yaml).
HF_PROVIDER_FIELDS = {'deepseek-v4-flash': {'mtp_num_layers': 1}}


def extract(cfg, row, ctx, it, prec):
    m = g(cfg, 'model') or {}
    notes = []
    gran = g(m, 'recompute_granularity'); mods = g(m, 'recompute_modules')
    if gran == 'selective' and mods is None:
        mods = ['core_attn']; notes.append('recompute_modules=None with selective -> MCore post-init fills [core_attn]')
    if gran == 'selective' and mods == []:
        notes.append('selective with empty recompute_modules = nothing recomputed')
    if not gran and mods:
        notes.append(f"recompute_modules={fmt(mods)} set but recompute_granularity is None -> MCore recomputes nothing")
    meth = g(m, 'recompute_method') if gran == 'full' else None
    nl = g(m, 'recompute_num_layers') if gran == 'full' else None
    mp = g(cfg, 'mixed_precision') or {}
    bs = be = ''
    if prec != 'bf16':
        if g(mp, 'first_last_layers_bf16'):
            bs = g(mp, 'num_layers_at_start_in_bf16', default=0); be = g(mp, 'num_layers_at_end_in_bf16', default=0)
        else:
            bs = be = 0
        if g(mp, 'fp8_recipe') is None and g(mp, 'fp4_recipe') is None:
            notes.append('precision preset not resolved')
    is_moe = ctx['is_moe']
    disp = g(m, 'moe_token_dispatcher_type') if is_moe else ''
    fb = g(m, 'moe_flex_dispatcher_backend') if is_moe and disp == 'flex' else ''
    epo = g(cfg, 'comm_overlap', 'overlap_moe_expert_parallel_comm', default=False) if is_moe else ''
    if is_moe and disp is None:
        notes.append('moe_token_dispatcher_type not set anywhere in the recipe chain (left to the model provider default)')
    if is_moe:
        so = g(m, 'moe_shared_expert_overlap'); pf = g(m, 'moe_permute_fusion')
        if so is not None: notes.append(f'moe_shared_expert_overlap={fmt(so)}')
        if pf is not None: notes.append(f'moe_permute_fusion={fmt(pf)}')
    mtp = g(m, 'mtp_num_layers')
    if mtp is None and isinstance(m, UObj):
        mtp = HF_PROVIDER_FIELDS.get(row['model'], {}).get('mtp_num_layers')
        if mtp: notes.append(f'mtp_num_layers={mtp} from the HF config (AutoBridge provider)')
    mtp = mtp or 0
    tpo = g(cfg, 'comm_overlap', 'tp_comm_overlap')
    tp = g(m, 'tensor_model_parallel_size')
    if tpo and tp == 1: notes.append('tp_comm_overlap requested but TP=1 (inactive)')
    cgi = g(m, 'cuda_graph_impl'); cgs = g(m, 'cuda_graph_scope')
    if isinstance(cgs, str): cgs = [cgs]
    cg = '' if cgi in (None, 'none') else f"{cgi}:{'+'.join(str(x) for x in (cgs or []) if x) or 'default'}"
    off = []
    if g(m, 'cpu_offloading') and g(m, 'cpu_offloading_num_layers'):
        off.append(f"cpu_offloading_num_layers={g(m, 'cpu_offloading_num_layers')}")
    if g(m, 'fine_grained_activation_offloading'):
        off.append('fine_grained:' + '+'.join(g(m, 'offload_modules') or []))
    if g(cfg, 'ddp', 'use_megatron_fsdp'): notes.append('megatron_fsdp=true')
    # FP8 attention (Transformer Engine's FP8 DotProductAttention: cuDNN FP8 SDPA); only meaningful in FP8 recipes
    f8a = bool(g(mp, 'fp8_dot_product_attention', default=False)) if prec != 'bf16' else False
    # parallelism check
    vp = g(m, 'virtual_pipeline_model_parallel_size')
    layout = dict(tp=g(m, 'tensor_model_parallel_size'), pp=g(m, 'pipeline_model_parallel_size'),
                  cp=g(m, 'context_parallel_size'), vpp=vp)
    if is_moe: layout['ep'] = g(m, 'expert_model_parallel_size')
    layout['mbs'] = g(cfg, 'train', 'micro_batch_size')
    gbs = g(cfg, 'train', 'global_batch_size')
    base = ctx.get('base')
    n = int(row['n_gpus'])
    if base is not None and base.get('num_gpus') and base['num_gpus'] != n and gbs is not None:
        gbs = int(base['global_batch_size'] / base['num_gpus'] * n)
        notes.append(f"base config is for {base['num_gpus']} GPUs; GBS auto-scaled to {gbs} for {n} GPUs")
    layout['gbs'] = gbs
    mm = layout_mismatches(row, layout)
    return dict(recompute_granularity=gran or 'none', recompute_modules=fmt(mods) if gran else '',
                recompute_method=fmt(meth), recompute_num_layers=fmt(nl), bf16_layers_start=fmt(bs),
                bf16_layers_end=fmt(be), dispatcher=fmt(disp), flex_backend=fmt(fb), ep_overlap=fmt(epo),
                mtp_layers=fmt(mtp), tp_comm_overlap=fmt(tpo), cuda_graph=cg, offload=';'.join(off),
                fp8_attention=fmt(f8a), token_drop=fmt(g(m, 'moe_pad_expert_input_to_capacity')) if is_moe else '',
                mismatch='; '.join(mm)), notes


def map_row(git, row):
    rid = row['id']; rel = rid.split('-')[1]
    out = {c: '' for c in COLS}; out['id'] = rid; out['release'] = rel
    tag = RELEASE_TAG.get(rel); out['tag'] = tag or ''
    if row['model'] not in MODEL or row['precision'] not in PREC or row['gpu'] not in GPU:
        out['note'] = 'model/precision/gpu not mapped'; return out
    fam, recipe, fam02 = MODEL[row['model']]
    prec = PREC[row['precision']]; gpu = GPU[row['gpu']]; n = int(row['n_gpus'])
    if tag in HAND:
        return None
    b = find_builder(git, tag, fam, recipe, fam02, gpu, prec, n)
    if b is None:
        out['note'] = f'no perf recipe for {recipe}/{gpu}/{prec} at {tag}'; return out
    path, name, kwargs = b
    is_moe = bool(row['experts'].strip())
    cfg, ctx, it = build(git, tag, path, name, kwargs, gpu, is_moe)
    if not isinstance(cfg, Obj):
        out['note'] = f"recipe {path}::{name} did not resolve ({ctx.get('base_name', '')})"; return out
    res, notes = extract(cfg, row, ctx, it, prec)
    chosen = ctx.get('base_name')
    if res['mismatch'] and chosen and chosen.endswith('_V2'):
        cfg1, ctx1, it1 = build(git, tag, path, name, kwargs, gpu, is_moe, force_variant='v1')
        if isinstance(cfg1, Obj) and ctx1.get('base_name', '').endswith('_V1'):
            res1, notes1 = extract(cfg1, row, ctx1, it1, prec)
            if not res1['mismatch']:
                notes1.append(f"default variant v2 ({chosen.split('::')[1]}) disagrees with row ({res['mismatch']}); v1 matches -> v1 used")
                res, notes, ctx, it = res1, notes1, ctx1, it1
    out.update(res)
    rec = f'{path}@{tag}::{name}'
    if ctx.get('base_name'): rec += ' <- ' + ctx['base_name'].split('::')[-1]
    out['recipe'] = rec
    # keep only unresolved branches whose condition could affect the reported fields
    rel = re.compile(r'recompute|dispatcher_type|flex_dispatcher_backend ==|a2a|overlap_moe|mtp|bf16|layers_at|cuda_graph|offload|precision|tp_comm|skipped')
    unres = sorted(set(x for x in it.notes if ('unresolved branch' in x or 'skipped' in x) and rel.search(x) and 'num_sms' not in x))
    out['note'] = '; '.join(notes + unres)
    return out


def main():
    git = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    rows = list(csv.DictReader(open(os.path.join(here, '..', 'data', 'nvidia_perf.csv'))))
    outs = []
    for row in rows:
        if not row['dataset'].startswith('megatron-bridge-'): continue
        o = map_row(git, row)
        if o is None: o = hand_row(row)
        if o is not None: outs.append(o)
    with open(os.path.join(here, 'recipes.csv'), 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=COLS, lineterminator='\n'); w.writeheader(); w.writerows(outs)
    print(f'wrote {len(outs)} rows', file=sys.stderr)


# ---------------------------------------------------------------- release 25.09, read by hand
# 25.09 (v0.1.0rc3) ran scripts/performance/run_script.py: main() builds the recipe with per-model code (lines 49-109),
# merges the ConfigContainer section of configs/<family>/<model>_llm_pretrain.yaml over it, then that YAML's
# perf_matrix[gpu][num_gpus_N] (common, then the precision's entry) through utils/helpers.py
# apply_perf_matrix_overrides: cuda_graphs -> model.enable_cuda_graph (Megatron-Core's per-layer graphs, scope "full":
# the whole transformer layer), recompute_num_layers -> full/block, cpu_offloading_num_layers -> offloading, and
# precision cs -> first_last_layers_bf16 False (helpers.py get_precision_config). The interpreter above does not follow
# that runner; the facts below were read at v0.1.0rc3 and each names its line.
HAND = {'v0.1.0rc3'}
H_RUN = 'scripts/performance/run_script.py@v0.1.0rc3'
H_YAML = {'llama3_8b': 'llama3/llama3_8b_llm_pretrain.yaml', 'llama3_70b': 'llama3/llama3_70b_llm_pretrain.yaml',
          'llama31_405b': 'llama31/llama31_405b_llm_pretrain.yaml',
          'qwen3_30b_a3b': 'qwen3/qwen3_30b_a3b_llm_pretrain.yaml',
          'qwen3_235b_a22b': 'qwen3/qwen3_235b_a22b_llm_pretrain.yaml',
          'deepseek_v3': 'deepseek/deepseek_v3_llm_pretrain.yaml'}
# (recipe, gpu) -> settings; a precision key (fp8_cs, fp8_mx, ...) overrides. Parallelism as the perf_matrix has it
# (compared with the row: `mismatch`); graphs = perf_matrix cuda_graphs.
H_MATRIX = {
    ('llama3_8b', 'h100'): dict(tp=1, pp=1, cp=1, vpp=None, mbs=1, graphs=False, fp8_cs=dict(fsdp=True)),
    ('llama3_8b', 'b200'): dict(tp=1, pp=1, cp=1, vpp=None, mbs=2, graphs=True),
    ('llama3_8b', 'gb200'): dict(tp=1, pp=1, cp=1, vpp=None, mbs=2, graphs=True),
    ('llama3_70b', 'h100'): dict(tp=4, pp=8, cp=1, vpp=5, mbs=1, graphs=False),
    ('llama3_70b', 'gb200'): dict(cp=1, graphs=False,
                                  fp8_cs=dict(tp=1, pp=1, vpp=None, mbs=2, fsdp=True, offload=40),
                                  fp8_mx=dict(tp=2, pp=4, vpp=5, mbs=1)),
    ('llama31_405b', 'h100'): dict(tp=8, pp=8, cp=2, vpp=8, mbs=1, graphs=False),
    ('llama31_405b', 'b200'): dict(tp=4, pp=8, cp=2, vpp=8, mbs=1, graphs=False),
    ('llama31_405b', 'gb200'): dict(mbs=1, graphs=False, fp8_cs=dict(tp=2, pp=1, cp=1, vpp=None, fsdp=True, offload=95),
                                    fp8_mx=dict(tp=4, pp=8, cp=2, vpp=8)),
    ('qwen3_30b_a3b', 'h100'): dict(tp=1, pp=2, cp=1, vpp=24, ep=8, mbs=1, graphs=False, fp8_cs=dict(mbs=2)),
    ('qwen3_30b_a3b', 'gb200'): dict(tp=1, pp=1, cp=1, vpp=None, ep=8, mbs=4, graphs=True),
    ('qwen3_30b_a3b', 'b200'): dict(tp=1, pp=8, cp=1, vpp=12, ep=8, mbs=1, graphs=True),
    ('qwen3_235b_a22b', 'h100'): dict(tp=2, pp=8, cp=1, vpp=4, ep=32, mbs=1, graphs=False),
    ('qwen3_235b_a22b', 'gb200'): dict(tp=2, pp=1, cp=1, vpp=None, ep=64, mbs=1, graphs=True),
    ('qwen3_235b_a22b', 'b200'): dict(tp=1, pp=8, cp=1, vpp=12, ep=8, mbs=1, graphs=False),
    ('deepseek_v3', 'h100'): dict(tp=2, pp=8, cp=1, vpp=4, ep=64, mbs=1, graphs=False),
    ('deepseek_v3', 'b200'): dict(tp=2, pp=16, cp=1, vpp=None, ep=8, mbs=1, graphs=False,
                                  fp8_cs=dict(graphs=True), fp8_mx=dict(graphs=True)),
    ('deepseek_v3', 'gb200'): dict(tp=1, pp=4, cp=1, vpp=8, ep=64, mbs=1, graphs=False),
}


def hand_row(row):
    """recipes.csv fields of a 25.09 row, from H_MATRIX and run_script.py main() (None: not a 25.09 row we know)."""
    rid = row['id']
    if RELEASE_TAG.get(rid.split('-')[1]) not in HAND or row['model'] not in MODEL or row['gpu'] not in GPU:
        return None
    _, recipe, _ = MODEL[row['model']]
    gpu, prec = GPU[row['gpu']], PREC.get(row['precision'], row['precision'])
    m = H_MATRIX.get((recipe, gpu))
    if m is None:
        return None
    m = {**{k: v for k, v in m.items() if not isinstance(v, dict)}, **m.get(prec, {})}
    out = {c: '' for c in COLS}
    out.update(id=rid, release='25.09', tag='v0.1.0rc3', bf16_layers_start='0', bf16_layers_end='0',
               recipe=f"{H_RUN}::main <- {recipe} pretrain_config + configs/{H_YAML[recipe]} perf_matrix.{gpu}")
    notes = []
    moe = recipe.startswith(('qwen3', 'deepseek'))
    gran, mods, mtp = 'none', '', 0
    if m.get('offload'):
        out['offload'] = f"cpu_offloading_num_layers={m['offload']}"   # helpers.py set_recompute_overrides
    if m.get('fsdp'):
        notes.append('megatron_fsdp=true')
    if recipe.startswith('qwen3'):
        # run_script.py 96-109: CommOverlapConfig(tp_comm_overlap=True), apply_moe_token_drop (capacity factor 1.0,
        # pad to capacity, alltoall); the YAML sets recompute_granularity null (the 30B recipe's full recompute off)
        out.update(dispatcher='alltoall', ep_overlap='false', tp_comm_overlap='true', token_drop='true')
    elif recipe == 'deepseek_v3':
        # run_script.py 55-95: DeepEP (flex) and the EP all-to-all overlap on H100 only; token drop on B200/GB200;
        # recompute modules by GPU (the YAML sets granularity selective; B200 keeps recompute_modules None, which
        # Megatron-Core fills with core_attn); MTP 1 (recipes/deepseek/deepseek_v3.py pretrain_config default)
        mtp, gran = 1, 'selective'
        mods = {'h100': 'mla_up_proj;mlp', 'gb200': 'mla_up_proj;mlp;moe_act'}.get(gpu, 'core_attn')
        if gpu == 'h100':
            out.update(dispatcher='flex', flex_backend='deepep', ep_overlap='true', token_drop='false')
            notes.append('moe_router_force_load_balancing=true; delay_wgrad_compute=true; moe_shared_expert_overlap=false')
        else:
            out.update(dispatcher='alltoall', ep_overlap='false', token_drop='true')
            notes.append('moe_shared_expert_overlap=true')
    if m.get('graphs'):
        if gran != 'none':
            # Megatron-Core's TransformerConfig refuses enable_cuda_graph with activation recompute ("CUDA graphs not
            # supported with activation recomputation"); the run completed, so one of the two did not hold
            notes.append(f'perf_matrix cuda_graphs=true conflicts with recompute {gran} ({mods}): graphs not taken')
        else:
            out['cuda_graph'] = 'local:full'
    if moe:
        notes.append('moe_permute_fusion=true')
    out.update(recompute_granularity=gran, recompute_modules=mods, mtp_layers=str(mtp))
    mm = layout_mismatches(row, {k: m[k] for k in ('tp', 'pp', 'cp', 'vpp', 'ep', 'mbs') if k in m})
    out['mismatch'] = '; '.join(mm)
    out['note'] = '; '.join(['read by hand (recipes.md: 25.09)'] + notes)
    return out


if __name__ == '__main__':
    main()
