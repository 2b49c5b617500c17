// Oracle fixtures for engine/src/text/chat_template.cpp: real chat templates rendered
// over a set of conversations by transformers.js's apply_chat_template (the
// @lenml/tokenizers 3.7.2 fork, which bundles @huggingface/jinja 0.2.2), written to
// tests/fixtures/chat_templates/<name>.json.
//
// That bundled Jinja engine is old: it cannot parse Qwen3's template (`messages[::-1]`)
// nor run Gemma 3's (no `is string` test). For those (and as a cross-check for the
// others) every case is also rendered by Python's jinja2 set up the way Python
// transformers' apply_chat_template sets it up (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, loopcontrols, its own tojson / raise_exception, tools and
// documents passed as None). Each case records which oracle produced it; the script
// fails if the two oracles disagree on a case both can render.
//
// Usage (Node 20, no network; python3 with jinja2 for the second oracle):
//   node tools/reference/make_chat_template_fixtures.mjs [NODE_MODULES]
// NODE_MODULES (or env PETREL_NPM_ORACLES) defaults to /work/npm-oracles/node_modules.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const nodeModules = process.argv[2] ?? process.env.PETREL_NPM_ORACLES ?? "/work/npm-oracles/node_modules";
const { TokenizerLoader } = await import(path.join(nodeModules, "@lenml/tokenizers/dist/main.mjs"));
const here = path.dirname(fileURLToPath(import.meta.url));
const fixtureDir = path.join(here, "../../tests/fixtures/chat_templates");

function loadTokenizer(name) {
  const dir = path.join(nodeModules, `@lenml/tokenizer-${name}/models`);
  return TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
  });
}
const SPECIAL_TOKEN_ATTRIBUTES = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];
// The string variables apply_chat_template passes: the tokenizer's special tokens, then
// the caller's keyword arguments over them.
function stringsFor(tokenizer, overrides) {
  const strings = {};
  for (const key of SPECIAL_TOKEN_ATTRIBUTES) {
    const value = tokenizer.getToken(key);
    if (value) strings[key] = value;
  }
  return { ...strings, ...overrides };
}

const PYTHON_ORACLE = String.raw`
import json, sys
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
job = json.load(sys.stdin)
template = env.from_string(job["template"])
results = []
for case in job["cases"]:
    i = case["inputs"]
    variables = dict(i["strings"]); variables.update(dict(i["flags"]))
    try:
        out = template.render(messages=i["messages"], tools=None, documents=None,
                              add_generation_prompt=i["add_generation_prompt"], **variables)
        results.append({"output": out})
    except Exception as e:
        results.append({"error": str(e), "error_type": type(e).__name__})
json.dump({"jinja2": jinja2.__version__, "results": results}, sys.stdout, ensure_ascii=False)
`;

function renderWithPython(template, cases) {
  const run = spawnSync("python3", ["-c", PYTHON_ORACLE], {
    input: JSON.stringify({ template, cases }),
    encoding: "utf8",
    maxBuffer: 1 << 28,
  });
  if (run.status !== 0) throw new Error(`python3 oracle failed: ${run.stderr}`);
  return JSON.parse(run.stdout);
}

// --- conversations -------------------------------------------------------------------
const u = (content) => ({ role: "user", content });
const a = (content) => ({ role: "assistant", content });
const s = (content) => ({ role: "system", content });
const t = (content) => ({ role: "tool", content });

const common = [
  ["single_user", [u("Hello!")]],
  ["system_user", [s("You are a helpful assistant."), u("What is 2+2?")]],
  ["multi_turn", [u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")]],
  ["system_multi_turn", [s("Be brief."), u("One"), a("Two"), u("Three"), a("Four"), u("Five")]],
  ["empty_user", [u("")]],
  ["empty_assistant", [u("Say nothing."), a(""), u("Thanks")]],
  ["empty_system", [s(""), u("Hi")]],
  ["cjk", [u("你好，世界！今日はいい天気ですね。안녕하세요"), a("你好！有什么可以帮你的吗？"), u("用中文回答")]],
  ["arabic", [s("أجب بالعربية"), u("مرحبا بالعالم، كيف حالك؟")]],
  ["emoji", [u("👋🏽 Hi 🇩🇪 👨‍👩‍👧 🎉"), a("🙂"), u("❤️‍🔥")]],
  ["combining_marks", [u("e\u0301te\u0301 n\u0303 Z\u0324\u0354\u0367\u0311\u0313 \u0915\u094d\u0937")]],
  ["surrounding_whitespace", [s("  \n sys \t"), u("  \n  hello world \t\n"), a("\n answer \n\n"), u("\tlast  ")]],
  ["unicode_whitespace", [u("\u3000full-width space\u3000"), a("\u00a0nbsp\u2003em\u2003"), u("x")]],
  ["jinja_syntax_in_content", [u("{{ not_a_var }} {% if x %} {# c #} }}{%")]],
  ["quotes_backslashes_newlines", [u("He said \"hi\" and 'bye' \\n \\\\ \nline2\r\nline3")]],
  ["no_generation_prompt", [u("Hi"), a("Hello"), u("Bye")], { add_generation_prompt: false }],
  ["ends_with_assistant", [u("Hi"), a("Hello there.")], { add_generation_prompt: false }],
  ["ends_with_assistant_prompt", [u("Hi"), a("Hello there.")]],
  ["long_content", [u("lorem ipsum dolor sit amet ".repeat(120)), a("ok ".repeat(200))]],
  ["ten_turns", Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? u(`question ${i}`) : a(`answer ${i}`)))],
  ["think_turns", [u("2+2?"), a("<think>\nAdd them.\n</think>\n\n4"), u("3+3?"), a("<think>\nAgain add.\n</think>\n\n6")], { add_generation_prompt: false }],
  ["think_history", [u("2+2?"), a("<think>\nAdd them.\n</think>\n\n4"), u("and 3+3?")]],
  ["think_no_newlines", [u("q"), a("<think>short</think>answer"), u("q2")]],
  ["enable_thinking_false", [u("Quick answer please.")], { flags: { enable_thinking: false } }],
  ["enable_thinking_true", [u("Think hard.")], { flags: { enable_thinking: true } }],
  ["non_alternating_users", [u("one"), u("two")]],
  ["assistant_first", [a("I start."), u("ok")]],
  ["system_only", [s("Only a system prompt.")]],
  ["system_in_middle", [u("a"), s("late system"), u("b")]],
  ["tool_turn", [u("weather?"), a("Let me check."), t("{\"temp\": 20}"), u("thanks")]],
  ["tool_response_user", [u("<tool_response>\nresult\n</tool_response>")]],
  ["empty_conversation", []],
];

const templates = [
  { name: "gemma3", host: "gemma3", strings: {} },
  { name: "qwen3", host: "qwen3", strings: {} },
  { name: "llama3.1", host: "qwen3", strings: { bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>", date_string: "01 Jan 2025" } },
  { name: "qwen2.5", host: "qwen3", strings: {} },
  { name: "gemma2", host: "gemma3", strings: {} },
];

const tokenizers = {};
let disagreements = 0;
for (const spec of templates) {
  const template = fs.readFileSync(path.join(fixtureDir, `${spec.name}.jinja`), "utf8");
  tokenizers[spec.host] ??= loadTokenizer(spec.host);
  const tokenizer = tokenizers[spec.host];
  const strings = stringsFor(tokenizer, spec.strings);
  const cases = common.map(([name, messages, options = {}]) => ({
    name,
    inputs: {
      messages,
      add_generation_prompt: options.add_generation_prompt ?? true,
      strings: Object.entries(strings),
      flags: Object.entries(options.flags ?? {}),
    },
  }));
  const python = renderWithPython(template, cases);
  for (const [i, c] of cases.entries()) {
    const { messages, add_generation_prompt, flags } = c.inputs;
    let js;
    try {
      js = {
        output: tokenizer.apply_chat_template(messages, {
          tokenize: false, add_generation_prompt, chat_template: template, ...strings, ...Object.fromEntries(flags),
        }),
      };
    } catch (e) {
      js = { error: e.message };
    }
    const py = python.results[i];
    // A raise_exception() is the template's own refusal; any other JS error is the
    // bundled Jinja engine's limit (unsupported syntax), where Python is the oracle.
    const raised = (r) => r.error !== undefined && (r.error_type === undefined ? !/Parser Error|Unknown|Cannot|Expected|Unexpected/.test(r.error) : r.error_type === "TemplateError");
    const jsUsable = js.output !== undefined || raised(js);
    if (jsUsable) {
      c.oracle = "transformers.js (@lenml/tokenizers 3.7.2, @huggingface/jinja 0.2.2)";
      if (js.output !== undefined) c.expected = js.output;
      else c.expected_error = js.error;
      const agrees = js.output !== undefined ? py.output === js.output : raised(py) && py.error === js.error;
      if (!agrees) {
        disagreements++;
        console.error(`${spec.name}/${c.name}: transformers.js and jinja2 disagree:\n  js: ${JSON.stringify(js)}\n  py: ${JSON.stringify(py)}`);
        c.jinja2 = py;
      }
    } else {
      c.oracle = `jinja2 ${python.jinja2} with Python transformers' settings (transformers.js: ${js.error})`;
      if (py.output !== undefined) c.expected = py.output;
      else {
        c.expected_error = py.error;
        // UndefinedError: jinja2 refuses an attribute of an undefined value, which
        // transformers.js (and chat_template.cpp, following it) reads as undefined.
        c.jinja2_error_type = py.error_type;
      }
    }
  }
  const out = { template_file: `${spec.name}.jinja`, template, cases };
  fs.writeFileSync(path.join(fixtureDir, `${spec.name}.json`), JSON.stringify(out, null, 1) + "\n");
  console.log(`${spec.name}: ${cases.length} cases, ${cases.filter((c) => c.expected_error !== undefined).length} refused`);
}
// --- snippets: one small template per case for what the real templates do not reach
// (whitespace rules, filters, slices, numbers, tojson); messages fixed. Rendered the
// same way; transformers.js's 0.2.2 engine parses few of them, jinja2 is the oracle then.
const snippetMessages = [s("Be brief."), u("héllo 👋"), a("Hi"), u("你好 e\u0301")];
const snippets = [
  ["lstrip_trim_blocks", "  {% if true %}\n  yes\n  {% endif %}\nafter\n"],
  ["dash_markers", "a  {%- if true -%}  b  {%- endif -%}  c\n  {{- ' d ' -}}  e"],
  ["comments", "{{ 'x' }}\n{# comment #}\nline\n  {#- c -#}  end\n    {# indented #}\nlast"],
  ["loop_variables", "{% for m in messages %}{{ loop.index }}/{{ loop.length }}/{{ loop.revindex0 }}:{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %}"],
  ["slices", "{{ messages[1:] | length }} {{ 'héllo wörld'[::-1] }} {{ 'abcdef'[1:4] }} {{ 'abcdef'[-2:] }} {{ [1,2,3,4,5][::2] }} {{ [1,2,3][5:] }} {{ 'abc'[-10:2] }}"],
  ["arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 1 + 2 * 3 }} {{ 'a' ~ 1 ~ none }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 2.5e-5 }} {{ 1.5 * 2 }} {{ -(3) }}"],
  ["string_methods", "{{ '  x  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nhi\\n'.lstrip('\\n') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith(('x','lo')) }}|{{ 'hello world'.title() }}|{{ 'aaa'.replace('a','b',2) }}|{{ 'HeLLo'.lower() }}{{ 'HeLLo'.upper() }}|{{ 'a</think>b</think>c'.split('</think>')[-1] }}"],
  ["filters", "{{ messages | map(attribute='role') | join(', ') }}|{{ messages | selectattr('role','equalto','user') | list | length }}|{{ undefined_var | default('dflt') }}|{{ '' | default('e', true) }}|{{ ' 5 ' | int + 1 }}|{{ 'x' | int }}|{{ 3.7 | int }}|{{ 'abc' | capitalize }}|{{ [3,1] | first }}{{ [3,1] | last }}|{{ {'a': 1, 'b': [1, 2]} | items | list }}|{{ 'a-b' | replace('-', '+') }}|{{ [1, 2, 3] | reject('equalto', 2) | list }}|{{ messages | length }}|{{ 'abc' | list }}|{{ none | string }}"],
  ["tojson", "{{ {'name': 'f', 'args': {'x': [1, 2.5, true, none, 'é\"\\n\\u0001']}} | tojson }}\n{{ {'a': [1, {'b': 2}], 'c': {}} | tojson(indent=4) }}\n{{ [] | tojson(indent=2) }}{{ messages[1] | tojson }}"],
  ["namespace_scoping", "{% set ns = namespace(count=0, last='') %}{% set outer = 'o' %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% set outer = m.role %}{% set ns.last = m.role %}{% endfor %}{{ ns.count }} {{ ns.last }} {{ outer }}"],
  ["tests", "{{ x is defined }} {{ messages is iterable }} {{ messages[0] is mapping }} {{ 'a' is string }} {{ 1 is number }} {{ none is none }} {{ true is true }} {{ 1 is odd }} {{ 4 is divisibleby 2 }} {{ messages[0].content is not none }} {{ 'ab' is lower }} {{ 1.0 is integer }} {{ x is undefined }}"],
  ["loop_filter_else", "{% for m in messages if m.role == 'user' %}{{ loop.index }}{{ m.content }}{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}"],
  ["conditional_in", "{{ 'yes' if 'b' in 'abc' else 'no' }} {{ 'k' in {'k': 1} }} {{ 2 not in [1, 2] }} {{ 'x' if false }}|{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ not 1 == 2 }} {{ [] or 'fallback' }} {{ 0 and 1 }}"],
  ["dict_methods", "{% set d = {'a': 1, 'b': 2} %}{{ d.get('a') }} {{ d.get('z', 'none') }} {{ d.get('z') }} {% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.keys() | list }} {{ d.values() | list }}{{ d['b'] }}{{ d.b }}"],
  ["value_output", "{{ [1, 'a', none, true, 1.5, \"it's\"] }} {{ {'k': 'v'} }} {{ none }} {{ true }} {{ 10 / 4 }} {{ -0.0 }} {{ 1e16 }} {{ 123456789.0 }} {{ 1/3 }}"],
  ["break_continue_range", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}|{{ range(2, 10, 3) | list }}|{{ range(3, 0, -1) | list }}"],
  ["crlf", "line1\r\n{% if true %}\r\nx\r\n{% endif %}\r\nend\r\n"],
  ["plus_markers", "  {%+ if true +%}\nkeep\n  {%- endif %}\n  {{ 'v' }}"],
  ["trailing_newlines", "a\n\n"],
  ["code_points", "{% for m in messages %}{{ m.content | length }},{{ m.content[0] }},{{ m.content[-1] }};{% endfor %}"],
  ["raise", "before{{ raise_exception('custom ' ~ 'failure') }}"],
  ["string_escapes", "{{ '\\u00e9\\x41\\t|\\\\|\\'' }}{{ \"it's\" }}{{ 'a' 'b' }}"],
  ["previtem_nextitem", "{% for m in messages %}{{ loop.previtem.role if loop.previtem is defined else '-' }}>{{ loop.nextitem.role if loop.nextitem is defined else '-' }}{{ loop.nextitem | default('-') is string }} {% endfor %}"],
  ["title_filter", "{{ 'hello-world foo(bar) x_y' | title }}"],
  ["list_accumulate", "{% set ns = namespace(items=[]) %}{% for m in messages %}{% set ns.items = ns.items + [m.role] %}{% endfor %}{{ ns.items | join('|') }} {{ ns.items | tojson }}"],
  ["strip_unicode_space", "[{{ '\\u3000 x\\u00a0' | trim }}][{{ '\\u2003y\\u2003'.strip() }}]"],
];
const snippetTokenizer = tokenizers.qwen3 ?? loadTokenizer("qwen3");
const snippetStrings = stringsFor(snippetTokenizer, {});
const snippetCases = [];
for (const [name, template] of snippets) {
  const c = { name, template, inputs: { messages: snippetMessages, add_generation_prompt: true, strings: Object.entries(snippetStrings), flags: [] } };
  const py = renderWithPython(template, [c]);
  const r = py.results[0];
  let js;
  try {
    js = { output: snippetTokenizer.apply_chat_template(snippetMessages, { tokenize: false, add_generation_prompt: true, chat_template: template }) };
  } catch (e) {
    js = { error: e.message };
  }
  if (js.output !== undefined && js.output === r.output) c.oracle = "transformers.js and jinja2 agree";
  else c.oracle = `jinja2 ${py.jinja2} with Python transformers' settings` + (js.output !== undefined ? ` (transformers.js differs: ${JSON.stringify(js.output)})` : ` (transformers.js: ${js.error})`);
  if (r.output !== undefined) c.expected = r.output;
  else c.expected_error = r.error;
  snippetCases.push(c);
}
fs.writeFileSync(path.join(fixtureDir, "snippets.json"), JSON.stringify({ cases: snippetCases }, null, 1) + "\n");
console.log(`snippets: ${snippetCases.length} cases`);

if (disagreements) console.error(`${disagreements} case(s) where the two oracles disagree (kept transformers.js's answer, jinja2's beside it)`);
