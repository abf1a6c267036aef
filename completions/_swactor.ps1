
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'swactor' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'swactor'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'swactor' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run a whole pipeline on this machine (`run local`), or plan one over a pool (`run plan`)')
            [CompletionResult]::new('generate', 'generate', [CompletionResultType]::ParameterValue, 'Generate text with a whole model in this one process (the pipeline''s reference)')
            [CompletionResult]::new('orchestrate', 'orchestrate', [CompletionResultType]::ParameterValue, 'Run a prompt through a pool of `swactor node boot` hosts')
            [CompletionResult]::new('model', 'model', [CompletionResultType]::ParameterValue, 'Inspect and synthesize GGUF models')
            [CompletionResult]::new('node', 'node', [CompletionResultType]::ParameterValue, 'Run this host as a pool node, or print its identity')
            [CompletionResult]::new('edge', 'edge', [CompletionResultType]::ParameterValue, 'Inspect the live edges of a node')
            [CompletionResult]::new('cache', 'cache', [CompletionResultType]::ParameterValue, 'List or clear a node''s downloaded weights')
            [CompletionResult]::new('pool', 'pool', [CompletionResultType]::ParameterValue, 'Watch a pool from the orchestrator''s side')
            [CompletionResult]::new('relay', 'relay', [CompletionResultType]::ParameterValue, 'Host an iroh relay for pool members behind NAT')
            [CompletionResult]::new('chat', 'chat', [CompletionResultType]::ParameterValue, 'Chat with a swactor server: an interactive loop on a terminal (the conversation is kept), one exchange from standard input otherwise')
            [CompletionResult]::new('complete', 'complete', [CompletionResultType]::ParameterValue, 'Ask a swactor server to complete a prompt; the text on stdout (streamed with --stream), the whole response with --json')
            [CompletionResult]::new('bench', 'bench', [CompletionResultType]::ParameterValue, 'Measure the data plane on this machine (each figure beside its baseline)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;run' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('plan', 'plan', [CompletionResultType]::ParameterValue, 'Plan a run over a pool and predict its resources, without running anything')
            [CompletionResult]::new('local', 'local', [CompletionResultType]::ParameterValue, 'Run a whole pipeline on this machine: N `swactor node boot` children on loopback, the orchestrator in this process; prints the generated text and cleans up')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;run;plan' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model to plan for')
            [CompletionResult]::new('--pool', '--pool', [CompletionResultType]::ParameterName, 'The pool file (TOML inventory of nodes)')
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Number of stages [default: one per placement node, or per pool node]')
            [CompletionResult]::new('--layers', '--layers', [CompletionResultType]::ParameterName, 'Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`')
            [CompletionResult]::new('--nodes', '--nodes', [CompletionResultType]::ParameterName, 'Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order]')
            [CompletionResult]::new('--balance', '--balance', [CompletionResultType]::ParameterName, 'What automatic layer ranges balance: the stages'' decode steps from the speed each node measured at boot (within its memory), or their bytes against node memory')
            [CompletionResult]::new('--min-speedup', '--min-speedup', [CompletionResultType]::ParameterName, 'Refuse a plan predicted to decode one sequence slower than X times the best single node that holds the model (`below_min_speedup`, exit 4)')
            [CompletionResult]::new('--prompt-tokens', '--prompt-tokens', [CompletionResultType]::ParameterName, 'Prompt length assumed for the prefill predictions')
            [CompletionResult]::new('--weights-url', '--weights-url', [CompletionResultType]::ParameterName, 'Nodes download the weights from this `http(s)://host[:port]/path` URL instead of reading `--model`''s path; the plan carries the size and sha256 of the local `--model` file to check them against')
            [CompletionResult]::new('--run-id', '--run-id', [CompletionResultType]::ParameterName, 'The run id to write into the plan')
            [CompletionResult]::new('--max-seq-len', '--max-seq-len', [CompletionResultType]::ParameterName, 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model''s trained context length, lowered to what the nodes'' memory holds; `run plan` says which and why]')
            [CompletionResult]::new('--kv-cache', '--kv-cache', [CompletionResultType]::ParameterName, 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)')
            [CompletionResult]::new('--activation-dtype', '--activation-dtype', [CompletionResultType]::ParameterName, 'Element type of activations between stages (f32 is bit-exact with one process)')
            [CompletionResult]::new('--max-tokens', '--max-tokens', [CompletionResultType]::ParameterName, 'Most tokens to generate [default: until the end of sequence, a stop, or the context''s end; a server''s requests without `max_tokens` too]')
            [CompletionResult]::new('--sampling', '--sampling', [CompletionResultType]::ParameterName, 'How the last stage picks tokens')
            [CompletionResult]::new('--temperature', '--temperature', [CompletionResultType]::ParameterName, 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy')
            [CompletionResult]::new('--top-k', '--top-k', [CompletionResultType]::ParameterName, 'Keep only the K most likely tokens (with `--sampling sample`)')
            [CompletionResult]::new('--top-p', '--top-p', [CompletionResultType]::ParameterName, 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Seed of the sampler (with `--sampling sample`)')
            [CompletionResult]::new('--max-sequences', '--max-sequences', [CompletionResultType]::ParameterName, 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1]')
            [CompletionResult]::new('--prompt-cache-bytes', '--prompt-cache-bytes', [CompletionResultType]::ParameterName, 'Bytes each stage''s node may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]')
            [CompletionResult]::new('--auto-stages', '--auto-stages', [CompletionResultType]::ParameterName, 'Choose the stage count and nodes: of every count, the fastest nodes (by the speed each measured at boot) that hold the model, the plan predicted to decode fastest; fewer stages win ties (so slow links get fewer hops)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'swactor;run;local' {
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Number of stages (one node process each)')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model [default: a small synthesized model, written to a temporary file]')
            [CompletionResult]::new('--layout', '--layout', [CompletionResultType]::ParameterName, 'How the stages share this host''s cores: `one-host` (one micro-batch in flight, every core for the stage computing it) or `multi-host` (one micro-batch per stage, one thread per worker: the shape of a pool of hosts)')
            [CompletionResult]::new('--threads', '--threads', [CompletionResultType]::ParameterName, 'Compute threads of each stage worker (the nodes share this host; `--worker-threads` is an older name) [default: every core with `--layout one-host`, 1 with `multi-host`]')
            [CompletionResult]::new('--arena-bytes', '--arena-bytes', [CompletionResultType]::ParameterName, 'Arena bytes per node')
            [CompletionResult]::new('--http', '--http', [CompletionResultType]::ParameterName, 'Where the HTTP API listens [default: 127.0.0.1:8080]')
            [CompletionResult]::new('--grace-s', '--grace-s', [CompletionResultType]::ParameterName, 'Seconds a stop (SIGINT / SIGTERM) lets requests in flight finish before it cancels them [default: 30]')
            [CompletionResult]::new('--api-key-file', '--api-key-file', [CompletionResultType]::ParameterName, 'A file holding the API key: every route but /health and the page then needs `Authorization: Bearer KEY`')
            [CompletionResult]::new('--max-body-bytes', '--max-body-bytes', [CompletionResultType]::ParameterName, 'Request bodies over this many bytes are refused with 413 [default: 8388608]')
            [CompletionResult]::new('--max-connections', '--max-connections', [CompletionResultType]::ParameterName, 'HTTP connections open at once; a client past them is answered 503 at once [default: 256]')
            [CompletionResult]::new('--max-connections-per-peer', '--max-connections-per-peer', [CompletionResultType]::ParameterName, 'HTTP connections open at once from one IP address; a client past them is answered 429 at once (behind a proxy on this host every client is one address) [default: half of `--max-connections`]')
            [CompletionResult]::new('--header-timeout-s', '--header-timeout-s', [CompletionResultType]::ParameterName, 'Seconds a request''s headers may take to arrive (and an idle kept-alive connection stays open) [default: 10]')
            [CompletionResult]::new('--body-timeout-s', '--body-timeout-s', [CompletionResultType]::ParameterName, 'Seconds a request''s body may take to arrive once its headers have; then 408 and the connection closes [default: 30]')
            [CompletionResult]::new('--cors-origin', '--cors-origin', [CompletionResultType]::ParameterName, 'A page origin (`scheme://host[:port]`) allowed to call the API from a browser, besides the server''s own page and localhost pages; repeatable; `*` allows any')
            [CompletionResult]::new('--allowed-host', '--allowed-host', [CompletionResultType]::ParameterName, 'A host name (or `name:port`) requests may name in `Host`, besides IP addresses and `localhost` (this stops DNS rebinding); repeatable; `*` allows any. Without it, a server bound to a wildcard address (`0.0.0.0`, `[::]`) answers any name, one bound to a given address only IP addresses and `localhost`')
            [CompletionResult]::new('--model-name', '--model-name', [CompletionResultType]::ParameterName, 'The model''s name in /v1/models and in responses [default: the GGUF''s name, else its file name]')
            [CompletionResult]::new('--prompt', '--prompt', [CompletionResultType]::ParameterName, 'The prompt text')
            [CompletionResult]::new('--requests', '--requests', [CompletionResultType]::ParameterName, 'Run a batch job: JSON Lines requests (`id`, `prompt` or `messages`, `max_tokens`, `temperature`, `top_p`, `top_k`, `seed`, `stop`) served concurrently by one session; one JSON line per request''s result (or error) on stdout. `-` reads standard input')
            [CompletionResult]::new('--queue', '--queue', [CompletionResultType]::ParameterName, 'With `--requests` or `--serve`: requests waiting for a slot at most (more are refused as `busy`, 429 when serving) [default: every request of the file; 64 when serving]')
            [CompletionResult]::new('--groups', '--groups', [CompletionResultType]::ParameterName, 'With `--requests` or `--serve`: micro-batches in flight at most (the sequences are spread over this many groups) [default: one per stage, at most `--max-sequences`]')
            [CompletionResult]::new('--prefill-budget-ms', '--prefill-budget-ms', [CompletionResultType]::ParameterName, 'With `--requests` or `--serve`: a micro-batch carrying a prompt chunk while other sequences decode should come back within this many milliseconds; the chunk size follows what the session measures (0: chunks follow the row budget alone)')
            [CompletionResult]::new('--speculate', '--speculate', [CompletionResultType]::ParameterName, 'Speculative decoding: `ngram` drafts each sequence''s next tokens from its own prompt and output and verifies them in one trip through the pipeline (the output is the same tokens as without it)')
            [CompletionResult]::new('--draft-max', '--draft-max', [CompletionResultType]::ParameterName, 'With `--speculate`: the most tokens drafted per trip (the length follows each sequence''s measured acceptance)')
            [CompletionResult]::new('--draft-min', '--draft-min', [CompletionResultType]::ParameterName, 'With `--speculate`: the fewest tokens drafted per trip where the drafter has them, whatever the measured acceptance and row cost (0: the length adapts alone; at most `--draft-max`)')
            [CompletionResult]::new('--draft-model', '--draft-model', [CompletionResultType]::ParameterName, 'A draft model (same vocabulary as the model) that proposes the drafts, run greedily by this process''s engine for every speculating sequence at once; implies speculation')
            [CompletionResult]::new('--draft-threads', '--draft-threads', [CompletionResultType]::ParameterName, 'With `--draft-model`: its compute threads in this process')
            [CompletionResult]::new('--events', '--events', [CompletionResultType]::ParameterName, 'Write every event of the run as JSON Lines to this file')
            [CompletionResult]::new('--readiness-timeout', '--readiness-timeout', [CompletionResultType]::ParameterName, 'Seconds to wait for every stage to be ready (weights loaded, edges up)')
            [CompletionResult]::new('--token-timeout', '--token-timeout', [CompletionResultType]::ParameterName, 'Seconds to wait for each token')
            [CompletionResult]::new('--resume-timeout', '--resume-timeout', [CompletionResultType]::ParameterName, 'Seconds to wait for enough nodes to re-form after a node is lost; then every request the session held ends with the fault')
            [CompletionResult]::new('--max-resumes', '--max-resumes', [CompletionResultType]::ParameterName, 'Times one request may be resumed; past that it ends with the fault')
            [CompletionResult]::new('--max-seq-len', '--max-seq-len', [CompletionResultType]::ParameterName, 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model''s trained context length, lowered to what the nodes'' memory holds; `run plan` says which and why]')
            [CompletionResult]::new('--kv-cache', '--kv-cache', [CompletionResultType]::ParameterName, 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)')
            [CompletionResult]::new('--activation-dtype', '--activation-dtype', [CompletionResultType]::ParameterName, 'Element type of activations between stages (f32 is bit-exact with one process)')
            [CompletionResult]::new('--max-tokens', '--max-tokens', [CompletionResultType]::ParameterName, 'Most tokens to generate [default: until the end of sequence, a stop, or the context''s end; a server''s requests without `max_tokens` too]')
            [CompletionResult]::new('--sampling', '--sampling', [CompletionResultType]::ParameterName, 'How the last stage picks tokens')
            [CompletionResult]::new('--temperature', '--temperature', [CompletionResultType]::ParameterName, 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy')
            [CompletionResult]::new('--top-k', '--top-k', [CompletionResultType]::ParameterName, 'Keep only the K most likely tokens (with `--sampling sample`)')
            [CompletionResult]::new('--top-p', '--top-p', [CompletionResultType]::ParameterName, 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Seed of the sampler (with `--sampling sample`)')
            [CompletionResult]::new('--prompt-cache-bytes', '--prompt-cache-bytes', [CompletionResultType]::ParameterName, 'Bytes each stage''s node may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]')
            [CompletionResult]::new('--run-id', '--run-id', [CompletionResultType]::ParameterName, 'The run id (default: a fresh one, from this host''s clock in microseconds, so no two runs of an orchestrator share one)')
            [CompletionResult]::new('--max-sequences', '--max-sequences', [CompletionResultType]::ParameterName, 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1, or 8 with `--requests` or `--serve`]')
            [CompletionResult]::new('--node-logs', '--node-logs', [CompletionResultType]::ParameterName, 'Pass the nodes'' logs through to stderr')
            [CompletionResult]::new('--serve', '--serve', [CompletionResultType]::ParameterName, 'Serve the OpenAI-compatible HTTP API over the local pipeline instead of running one prompt or a requests file (see `orchestrate serve`)')
            [CompletionResult]::new('--chat', '--chat', [CompletionResultType]::ParameterName, 'Wrap the prompt in the model''s chat template (ChatML, Llama 3 or Llama 2 style)')
            [CompletionResult]::new('--stream', '--stream', [CompletionResultType]::ParameterName, 'With `--requests`: also a JSON line per generated token')
            [CompletionResult]::new('--no-resume', '--no-resume', [CompletionResultType]::ParameterName, 'Fail the session at once when a stage node is lost, as before re-formation existed (default: re-form over the nodes left and resume every request)')
            [CompletionResult]::new('--no-keep-caches', '--no-keep-caches', [CompletionResultType]::ParameterName, 'Rebuild every stage''s caches from the replay after a re-formation (default: the stages that stay on their node with the same layers keep theirs, and only the stages that moved are rebuilt, from the rows the kept stages logged)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'swactor;run;help' {
            [CompletionResult]::new('plan', 'plan', [CompletionResultType]::ParameterValue, 'Plan a run over a pool and predict its resources, without running anything')
            [CompletionResult]::new('local', 'local', [CompletionResultType]::ParameterValue, 'Run a whole pipeline on this machine: N `swactor node boot` children on loopback, the orchestrator in this process; prints the generated text and cleans up')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;run;help;plan' {
            break
        }
        'swactor;run;help;local' {
            break
        }
        'swactor;run;help;help' {
            break
        }
        'swactor;generate' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model')
            [CompletionResult]::new('--prompt', '--prompt', [CompletionResultType]::ParameterName, 'The prompt text')
            [CompletionResult]::new('--prompt-ids', '--prompt-ids', [CompletionResultType]::ParameterName, 'The prompt as token ids, comma-separated (nothing is added: give the bos id yourself), instead of `--prompt`')
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Split the model into this many stages in this process (activations cross each boundary as wire bytes, as in a pipeline)')
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'Where to compute: `cpu` (swactor''s engine), `candle` (candle''s CPU ops, the reference), or `cuda:N` in a build with the `cuda` feature')
            [CompletionResult]::new('--threads', '--threads', [CompletionResultType]::ParameterName, 'Compute threads (the in-process stages share them) [default: the CPUs available]')
            [CompletionResult]::new('--speculate', '--speculate', [CompletionResultType]::ParameterName, 'Speculative decoding: `ngram` drafts from the prompt and output so far and verifies each draft in one pass (the output is the same tokens as without it)')
            [CompletionResult]::new('--draft-model', '--draft-model', [CompletionResultType]::ParameterName, 'A draft model (same vocabulary) that proposes the drafts, run greedily in this process; implies speculation')
            [CompletionResult]::new('--draft-max', '--draft-max', [CompletionResultType]::ParameterName, 'The most tokens drafted per pass (the length follows the measured acceptance)')
            [CompletionResult]::new('--max-seq-len', '--max-seq-len', [CompletionResultType]::ParameterName, 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model''s trained context length, lowered to what the nodes'' memory holds; `run plan` says which and why]')
            [CompletionResult]::new('--kv-cache', '--kv-cache', [CompletionResultType]::ParameterName, 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)')
            [CompletionResult]::new('--activation-dtype', '--activation-dtype', [CompletionResultType]::ParameterName, 'Element type of activations between stages (f32 is bit-exact with one process)')
            [CompletionResult]::new('--max-tokens', '--max-tokens', [CompletionResultType]::ParameterName, 'Most tokens to generate [default: until the end of sequence, a stop, or the context''s end; a server''s requests without `max_tokens` too]')
            [CompletionResult]::new('--sampling', '--sampling', [CompletionResultType]::ParameterName, 'How the last stage picks tokens')
            [CompletionResult]::new('--temperature', '--temperature', [CompletionResultType]::ParameterName, 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy')
            [CompletionResult]::new('--top-k', '--top-k', [CompletionResultType]::ParameterName, 'Keep only the K most likely tokens (with `--sampling sample`)')
            [CompletionResult]::new('--top-p', '--top-p', [CompletionResultType]::ParameterName, 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Seed of the sampler (with `--sampling sample`)')
            [CompletionResult]::new('--max-sequences', '--max-sequences', [CompletionResultType]::ParameterName, 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1]')
            [CompletionResult]::new('--prompt-cache-bytes', '--prompt-cache-bytes', [CompletionResultType]::ParameterName, 'Bytes each stage''s node may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]')
            [CompletionResult]::new('--chat', '--chat', [CompletionResultType]::ParameterName, 'Wrap the prompt in the model''s chat template (ChatML, Llama 3, Gemma or Llama 2 style), as `run local --chat` does')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'swactor;orchestrate' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('pool', 'pool', [CompletionResultType]::ParameterValue, 'Wait for the pool to be ready, plan, provision every stage, inject the prompt, stream the generated text, and tear the run down')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serve the OpenAI-compatible HTTP API over the pool: form a session when the pool is ready, serve while it lasts, form a new one after a fault; SIGINT / SIGTERM drain within --grace-s and exit 0')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;orchestrate;pool' {
            [CompletionResult]::new('--pool', '--pool', [CompletionResultType]::ParameterName, 'The pool file')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model (the orchestrator''s copy: tokenizer and plan come from it)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The orchestrator''s key file (nodes were started with its endpoint id)')
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Number of stages [default: one per placement node, or per pool node]')
            [CompletionResult]::new('--layers', '--layers', [CompletionResultType]::ParameterName, 'Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`')
            [CompletionResult]::new('--nodes', '--nodes', [CompletionResultType]::ParameterName, 'Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order]')
            [CompletionResult]::new('--balance', '--balance', [CompletionResultType]::ParameterName, 'What automatic layer ranges balance: the stages'' decode steps from the speed each node measured at boot (within its memory), or their bytes against node memory')
            [CompletionResult]::new('--min-speedup', '--min-speedup', [CompletionResultType]::ParameterName, 'Refuse a plan predicted to decode one sequence slower than X times the best single node that holds the model (`below_min_speedup`, exit 4)')
            [CompletionResult]::new('--weights-url', '--weights-url', [CompletionResultType]::ParameterName, 'Nodes download the weights from this `http(s)://host[:port]/path` URL (checked against `--model`''s size and sha256) instead of reading `--model`''s path on their own disk')
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'iroh listen address (must be reachable by the nodes)')
            [CompletionResult]::new('--swim', '--swim', [CompletionResultType]::ParameterName, 'SWIM listen address')
            [CompletionResult]::new('--advertise', '--advertise', [CompletionResultType]::ParameterName, 'The address other hosts reach this one at, when listening on an unspecified address (default: the local address of the route toward the pool''s nodes / join seeds; never `0.0.0.0`)')
            [CompletionResult]::new('--swim-rtt-ms', '--swim-rtt-ms', [CompletionResultType]::ParameterName, 'The longest round trip between pool members, milliseconds, for SWIM''s probe timings (members on wide-area links or behind relays: each probe waits 1.5 times it; up to 40 the LAN profile, failure detection in under a second)')
            [CompletionResult]::new('--window-ms', '--window-ms', [CompletionResultType]::ParameterName, 'Convergence window in milliseconds')
            [CompletionResult]::new('--pool-timeout', '--pool-timeout', [CompletionResultType]::ParameterName, 'Seconds to wait for the pool to be ready')
            [CompletionResult]::new('--relay', '--relay', [CompletionResultType]::ParameterName, 'An iroh relay to reach peers through when no direct path exists, and to be reached through: `http://HOST:PORT` or `https://HOST[:PORT]`, e.g. one `swactor relay serve` runs (repeatable; the first is this host''s home relay). iroh moves a relayed connection to a direct path when one works')
            [CompletionResult]::new('--relay-ca', '--relay-ca', [CompletionResultType]::ParameterName, 'A PEM certificate an HTTPS relay''s certificate may chain to, beside the public roots (a relay serving a certificate of its own, e.g. self-signed)')
            [CompletionResult]::new('--prompt', '--prompt', [CompletionResultType]::ParameterName, 'The prompt text')
            [CompletionResult]::new('--requests', '--requests', [CompletionResultType]::ParameterName, 'Run a batch job: JSON Lines requests (`id`, `prompt` or `messages`, `max_tokens`, `temperature`, `top_p`, `top_k`, `seed`, `stop`) served concurrently by one session; one JSON line per request''s result (or error) on stdout. `-` reads standard input')
            [CompletionResult]::new('--queue', '--queue', [CompletionResultType]::ParameterName, 'With `--requests` or `--serve`: requests waiting for a slot at most (more are refused as `busy`, 429 when serving) [default: every request of the file; 64 when serving]')
            [CompletionResult]::new('--groups', '--groups', [CompletionResultType]::ParameterName, 'With `--requests` or `--serve`: micro-batches in flight at most (the sequences are spread over this many groups) [default: one per stage, at most `--max-sequences`]')
            [CompletionResult]::new('--prefill-budget-ms', '--prefill-budget-ms', [CompletionResultType]::ParameterName, 'With `--requests` or `--serve`: a micro-batch carrying a prompt chunk while other sequences decode should come back within this many milliseconds; the chunk size follows what the session measures (0: chunks follow the row budget alone)')
            [CompletionResult]::new('--speculate', '--speculate', [CompletionResultType]::ParameterName, 'Speculative decoding: `ngram` drafts each sequence''s next tokens from its own prompt and output and verifies them in one trip through the pipeline (the output is the same tokens as without it)')
            [CompletionResult]::new('--draft-max', '--draft-max', [CompletionResultType]::ParameterName, 'With `--speculate`: the most tokens drafted per trip (the length follows each sequence''s measured acceptance)')
            [CompletionResult]::new('--draft-min', '--draft-min', [CompletionResultType]::ParameterName, 'With `--speculate`: the fewest tokens drafted per trip where the drafter has them, whatever the measured acceptance and row cost (0: the length adapts alone; at most `--draft-max`)')
            [CompletionResult]::new('--draft-model', '--draft-model', [CompletionResultType]::ParameterName, 'A draft model (same vocabulary as the model) that proposes the drafts, run greedily by this process''s engine for every speculating sequence at once; implies speculation')
            [CompletionResult]::new('--draft-threads', '--draft-threads', [CompletionResultType]::ParameterName, 'With `--draft-model`: its compute threads in this process')
            [CompletionResult]::new('--events', '--events', [CompletionResultType]::ParameterName, 'Write every event of the run as JSON Lines to this file')
            [CompletionResult]::new('--readiness-timeout', '--readiness-timeout', [CompletionResultType]::ParameterName, 'Seconds to wait for every stage to be ready (weights loaded, edges up)')
            [CompletionResult]::new('--token-timeout', '--token-timeout', [CompletionResultType]::ParameterName, 'Seconds to wait for each token')
            [CompletionResult]::new('--resume-timeout', '--resume-timeout', [CompletionResultType]::ParameterName, 'Seconds to wait for enough nodes to re-form after a node is lost; then every request the session held ends with the fault')
            [CompletionResult]::new('--max-resumes', '--max-resumes', [CompletionResultType]::ParameterName, 'Times one request may be resumed; past that it ends with the fault')
            [CompletionResult]::new('--max-seq-len', '--max-seq-len', [CompletionResultType]::ParameterName, 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model''s trained context length, lowered to what the nodes'' memory holds; `run plan` says which and why]')
            [CompletionResult]::new('--kv-cache', '--kv-cache', [CompletionResultType]::ParameterName, 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)')
            [CompletionResult]::new('--activation-dtype', '--activation-dtype', [CompletionResultType]::ParameterName, 'Element type of activations between stages (f32 is bit-exact with one process)')
            [CompletionResult]::new('--max-tokens', '--max-tokens', [CompletionResultType]::ParameterName, 'Most tokens to generate [default: until the end of sequence, a stop, or the context''s end; a server''s requests without `max_tokens` too]')
            [CompletionResult]::new('--sampling', '--sampling', [CompletionResultType]::ParameterName, 'How the last stage picks tokens')
            [CompletionResult]::new('--temperature', '--temperature', [CompletionResultType]::ParameterName, 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy')
            [CompletionResult]::new('--top-k', '--top-k', [CompletionResultType]::ParameterName, 'Keep only the K most likely tokens (with `--sampling sample`)')
            [CompletionResult]::new('--top-p', '--top-p', [CompletionResultType]::ParameterName, 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Seed of the sampler (with `--sampling sample`)')
            [CompletionResult]::new('--prompt-cache-bytes', '--prompt-cache-bytes', [CompletionResultType]::ParameterName, 'Bytes each stage''s node may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]')
            [CompletionResult]::new('--run-id', '--run-id', [CompletionResultType]::ParameterName, 'The run id (default: a fresh one, from this host''s clock in microseconds, so no two runs of an orchestrator share one)')
            [CompletionResult]::new('--max-sequences', '--max-sequences', [CompletionResultType]::ParameterName, 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1, or 8 with `--requests`]')
            [CompletionResult]::new('--auto-stages', '--auto-stages', [CompletionResultType]::ParameterName, 'Choose the stage count and nodes: of every count, the fastest nodes (by the speed each measured at boot) that hold the model, the plan predicted to decode fastest; fewer stages win ties (so slow links get fewer hops)')
            [CompletionResult]::new('--relay-only', '--relay-only', [CompletionResultType]::ParameterName, 'Use the relays alone: open no QUIC port (for a host that must not expose one)')
            [CompletionResult]::new('--chat', '--chat', [CompletionResultType]::ParameterName, 'Wrap the prompt in the model''s chat template (ChatML, Llama 3 or Llama 2 style)')
            [CompletionResult]::new('--stream', '--stream', [CompletionResultType]::ParameterName, 'With `--requests`: also a JSON line per generated token')
            [CompletionResult]::new('--no-resume', '--no-resume', [CompletionResultType]::ParameterName, 'Fail the session at once when a stage node is lost, as before re-formation existed (default: re-form over the nodes left and resume every request)')
            [CompletionResult]::new('--no-keep-caches', '--no-keep-caches', [CompletionResultType]::ParameterName, 'Rebuild every stage''s caches from the replay after a re-formation (default: the stages that stay on their node with the same layers keep theirs, and only the stages that moved are rebuilt, from the rows the kept stages logged)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'swactor;orchestrate;serve' {
            [CompletionResult]::new('--pool', '--pool', [CompletionResultType]::ParameterName, 'The pool file')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model (the orchestrator''s copy: tokenizer, chat template, facts)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The orchestrator''s key file (created on first use)')
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Number of stages [default: one per placement node, or per pool node]')
            [CompletionResult]::new('--layers', '--layers', [CompletionResultType]::ParameterName, 'Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`')
            [CompletionResult]::new('--nodes', '--nodes', [CompletionResultType]::ParameterName, 'Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order]')
            [CompletionResult]::new('--balance', '--balance', [CompletionResultType]::ParameterName, 'What automatic layer ranges balance: the stages'' decode steps from the speed each node measured at boot (within its memory), or their bytes against node memory')
            [CompletionResult]::new('--min-speedup', '--min-speedup', [CompletionResultType]::ParameterName, 'Refuse a plan predicted to decode one sequence slower than X times the best single node that holds the model (`below_min_speedup`, exit 4)')
            [CompletionResult]::new('--weights-url', '--weights-url', [CompletionResultType]::ParameterName, 'Nodes fetch their stage''s weights from this URL instead of their own copy')
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'iroh listen address (must be reachable by the nodes)')
            [CompletionResult]::new('--swim', '--swim', [CompletionResultType]::ParameterName, 'SWIM listen address')
            [CompletionResult]::new('--advertise', '--advertise', [CompletionResultType]::ParameterName, 'The address other hosts reach this one at, when listening on an unspecified address (default: the local address of the route toward the pool''s nodes / join seeds; never `0.0.0.0`)')
            [CompletionResult]::new('--swim-rtt-ms', '--swim-rtt-ms', [CompletionResultType]::ParameterName, 'The longest round trip between pool members, milliseconds, for SWIM''s probe timings (members on wide-area links or behind relays: each probe waits 1.5 times it; up to 40 the LAN profile, failure detection in under a second)')
            [CompletionResult]::new('--window-ms', '--window-ms', [CompletionResultType]::ParameterName, 'Convergence window in milliseconds')
            [CompletionResult]::new('--pool-timeout', '--pool-timeout', [CompletionResultType]::ParameterName, 'Seconds to wait for the pool to be ready')
            [CompletionResult]::new('--relay', '--relay', [CompletionResultType]::ParameterName, 'An iroh relay to reach peers through when no direct path exists, and to be reached through: `http://HOST:PORT` or `https://HOST[:PORT]`, e.g. one `swactor relay serve` runs (repeatable; the first is this host''s home relay). iroh moves a relayed connection to a direct path when one works')
            [CompletionResult]::new('--relay-ca', '--relay-ca', [CompletionResultType]::ParameterName, 'A PEM certificate an HTTPS relay''s certificate may chain to, beside the public roots (a relay serving a certificate of its own, e.g. self-signed)')
            [CompletionResult]::new('--http', '--http', [CompletionResultType]::ParameterName, 'Where the HTTP API listens [default: 127.0.0.1:8080]')
            [CompletionResult]::new('--grace-s', '--grace-s', [CompletionResultType]::ParameterName, 'Seconds a stop (SIGINT / SIGTERM) lets requests in flight finish before it cancels them [default: 30]')
            [CompletionResult]::new('--api-key-file', '--api-key-file', [CompletionResultType]::ParameterName, 'A file holding the API key: every route but /health and the page then needs `Authorization: Bearer KEY`')
            [CompletionResult]::new('--max-body-bytes', '--max-body-bytes', [CompletionResultType]::ParameterName, 'Request bodies over this many bytes are refused with 413 [default: 8388608]')
            [CompletionResult]::new('--max-connections', '--max-connections', [CompletionResultType]::ParameterName, 'HTTP connections open at once; a client past them is answered 503 at once [default: 256]')
            [CompletionResult]::new('--max-connections-per-peer', '--max-connections-per-peer', [CompletionResultType]::ParameterName, 'HTTP connections open at once from one IP address; a client past them is answered 429 at once (behind a proxy on this host every client is one address) [default: half of `--max-connections`]')
            [CompletionResult]::new('--header-timeout-s', '--header-timeout-s', [CompletionResultType]::ParameterName, 'Seconds a request''s headers may take to arrive (and an idle kept-alive connection stays open) [default: 10]')
            [CompletionResult]::new('--body-timeout-s', '--body-timeout-s', [CompletionResultType]::ParameterName, 'Seconds a request''s body may take to arrive once its headers have; then 408 and the connection closes [default: 30]')
            [CompletionResult]::new('--cors-origin', '--cors-origin', [CompletionResultType]::ParameterName, 'A page origin (`scheme://host[:port]`) allowed to call the API from a browser, besides the server''s own page and localhost pages; repeatable; `*` allows any')
            [CompletionResult]::new('--allowed-host', '--allowed-host', [CompletionResultType]::ParameterName, 'A host name (or `name:port`) requests may name in `Host`, besides IP addresses and `localhost` (this stops DNS rebinding); repeatable; `*` allows any. Without it, a server bound to a wildcard address (`0.0.0.0`, `[::]`) answers any name, one bound to a given address only IP addresses and `localhost`')
            [CompletionResult]::new('--model-name', '--model-name', [CompletionResultType]::ParameterName, 'The model''s name in /v1/models and in responses [default: the GGUF''s name, else its file name]')
            [CompletionResult]::new('--speculate', '--speculate', [CompletionResultType]::ParameterName, 'Speculative decoding: `ngram` drafts each sequence''s next tokens from its own prompt and output and verifies them in one trip through the pipeline (the output is the same tokens as without it)')
            [CompletionResult]::new('--draft-max', '--draft-max', [CompletionResultType]::ParameterName, 'With `--speculate`: the most tokens drafted per trip (the length follows each sequence''s measured acceptance)')
            [CompletionResult]::new('--draft-min', '--draft-min', [CompletionResultType]::ParameterName, 'With `--speculate`: the fewest tokens drafted per trip where the drafter has them, whatever the measured acceptance and row cost (0: the length adapts alone; at most `--draft-max`)')
            [CompletionResult]::new('--draft-model', '--draft-model', [CompletionResultType]::ParameterName, 'A draft model (same vocabulary as the model) that proposes the drafts, run greedily by this process''s engine for every speculating sequence at once; implies speculation')
            [CompletionResult]::new('--draft-threads', '--draft-threads', [CompletionResultType]::ParameterName, 'With `--draft-model`: its compute threads in this process')
            [CompletionResult]::new('--resume-timeout', '--resume-timeout', [CompletionResultType]::ParameterName, 'Seconds to wait for enough nodes to re-form after a node is lost; then every request the session held ends with the fault')
            [CompletionResult]::new('--max-resumes', '--max-resumes', [CompletionResultType]::ParameterName, 'Times one request may be resumed; past that it ends with the fault')
            [CompletionResult]::new('--max-seq-len', '--max-seq-len', [CompletionResultType]::ParameterName, 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model''s trained context length, lowered to what the nodes'' memory holds; `run plan` says which and why]')
            [CompletionResult]::new('--kv-cache', '--kv-cache', [CompletionResultType]::ParameterName, 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)')
            [CompletionResult]::new('--activation-dtype', '--activation-dtype', [CompletionResultType]::ParameterName, 'Element type of activations between stages (f32 is bit-exact with one process)')
            [CompletionResult]::new('--max-tokens', '--max-tokens', [CompletionResultType]::ParameterName, 'Most tokens to generate [default: until the end of sequence, a stop, or the context''s end; a server''s requests without `max_tokens` too]')
            [CompletionResult]::new('--sampling', '--sampling', [CompletionResultType]::ParameterName, 'How the last stage picks tokens')
            [CompletionResult]::new('--temperature', '--temperature', [CompletionResultType]::ParameterName, 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy')
            [CompletionResult]::new('--top-k', '--top-k', [CompletionResultType]::ParameterName, 'Keep only the K most likely tokens (with `--sampling sample`)')
            [CompletionResult]::new('--top-p', '--top-p', [CompletionResultType]::ParameterName, 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Seed of the sampler (with `--sampling sample`)')
            [CompletionResult]::new('--prompt-cache-bytes', '--prompt-cache-bytes', [CompletionResultType]::ParameterName, 'Bytes each stage''s node may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]')
            [CompletionResult]::new('--max-sequences', '--max-sequences', [CompletionResultType]::ParameterName, 'Sequences served at once, the session''s slots (1 to 256): every stage holds a KV cache per slot [default: 8]')
            [CompletionResult]::new('--queue', '--queue', [CompletionResultType]::ParameterName, 'Requests waiting for a slot at most; more are refused with 429 [default: 64]')
            [CompletionResult]::new('--groups', '--groups', [CompletionResultType]::ParameterName, 'Micro-batches in flight at most [default: one per stage, at most `--max-sequences`]')
            [CompletionResult]::new('--prefill-budget-ms', '--prefill-budget-ms', [CompletionResultType]::ParameterName, 'A micro-batch carrying a prompt chunk while other sequences decode should come back within this many milliseconds; the chunk size follows what the session measures (0: chunks follow the row budget alone)')
            [CompletionResult]::new('--events', '--events', [CompletionResultType]::ParameterName, 'Write every session''s events as JSON Lines to this file (never overwritten)')
            [CompletionResult]::new('--readiness-timeout', '--readiness-timeout', [CompletionResultType]::ParameterName, 'Seconds each session may take from provisioning to serving')
            [CompletionResult]::new('--token-timeout', '--token-timeout', [CompletionResultType]::ParameterName, 'Seconds a micro-batch in flight may take to come back before the session faults')
            [CompletionResult]::new('--auto-stages', '--auto-stages', [CompletionResultType]::ParameterName, 'Choose the stage count and nodes: of every count, the fastest nodes (by the speed each measured at boot) that hold the model, the plan predicted to decode fastest; fewer stages win ties (so slow links get fewer hops)')
            [CompletionResult]::new('--relay-only', '--relay-only', [CompletionResultType]::ParameterName, 'Use the relays alone: open no QUIC port (for a host that must not expose one)')
            [CompletionResult]::new('--no-resume', '--no-resume', [CompletionResultType]::ParameterName, 'Fail the session at once when a stage node is lost, as before re-formation existed (default: re-form over the nodes left and resume every request)')
            [CompletionResult]::new('--no-keep-caches', '--no-keep-caches', [CompletionResultType]::ParameterName, 'Rebuild every stage''s caches from the replay after a re-formation (default: the stages that stay on their node with the same layers keep theirs, and only the stages that moved are rebuilt, from the rows the kept stages logged)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'swactor;orchestrate;help' {
            [CompletionResult]::new('pool', 'pool', [CompletionResultType]::ParameterValue, 'Wait for the pool to be ready, plan, provision every stage, inject the prompt, stream the generated text, and tear the run down')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serve the OpenAI-compatible HTTP API over the pool: form a session when the pool is ready, serve while it lasts, form a new one after a fault; SIGINT / SIGTERM drain within --grace-s and exit 0')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;orchestrate;help;pool' {
            break
        }
        'swactor;orchestrate;help;serve' {
            break
        }
        'swactor;orchestrate;help;help' {
            break
        }
        'swactor;model' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('inspect', 'inspect', [CompletionResultType]::ParameterValue, 'Print the facts of a GGUF model: shape, tokenizer, rope, tensor bytes')
            [CompletionResult]::new('synth', 'synth', [CompletionResultType]::ParameterValue, 'Write a deterministic tiny model of any supported family (`--arch`) with random weights and a real BPE vocabulary')
            [CompletionResult]::new('quantize', 'quantize', [CompletionResultType]::ParameterValue, 'Re-quantize a model''s weight matrices (norms stay f32)')
            [CompletionResult]::new('tokenize', 'tokenize', [CompletionResultType]::ParameterValue, 'Print the token ids of a text as the model''s tokenizer splits it (`--json`: the ids and each token''s text)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;model;inspect' {
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Show the layers and weight bytes of each of N stages (the planner''s balance over nodes of equal memory) [default: 2, or 1 for a one-block model]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;model;synth' {
            [CompletionResult]::new('--out', '--out', [CompletionResultType]::ParameterName, 'Where to write the GGUF file')
            [CompletionResult]::new('--blocks', '--blocks', [CompletionResultType]::ParameterName, 'Transformer blocks')
            [CompletionResult]::new('--hidden', '--hidden', [CompletionResultType]::ParameterName, 'Hidden size')
            [CompletionResult]::new('--heads', '--heads', [CompletionResultType]::ParameterName, 'Attention heads')
            [CompletionResult]::new('--kv-heads', '--kv-heads', [CompletionResultType]::ParameterName, 'Key/value heads (grouped-query attention)')
            [CompletionResult]::new('--ffn', '--ffn', [CompletionResultType]::ParameterName, 'Feed-forward inner size')
            [CompletionResult]::new('--vocab', '--vocab', [CompletionResultType]::ParameterName, 'Vocabulary size (at least 257: 256 bytes and an end-of-text token)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'Context length recorded in the file')
            [CompletionResult]::new('--dtype', '--dtype', [CompletionResultType]::ParameterName, 'Storage type of the weight matrices')
            [CompletionResult]::new('--arch', '--arch', [CompletionResultType]::ParameterName, 'The family written: llama (Llama 2 style), llama3, qwen2, qwen3, gemma3, or a mixture of experts: qwen3moe, qwen2moe, mixtral, gpt-oss (`--ffn` is then each expert''s)')
            [CompletionResult]::new('--experts', '--experts', [CompletionResultType]::ParameterName, 'Experts per block of a mixture-of-experts family')
            [CompletionResult]::new('--experts-used', '--experts-used', [CompletionResultType]::ParameterName, 'Experts each token runs (mixture-of-experts families)')
            [CompletionResult]::new('--head-dim', '--head-dim', [CompletionResultType]::ParameterName, 'Each attention head''s size (default: the family''s, from hidden / heads)')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Seed of the random weights')
            [CompletionResult]::new('--vocab-from', '--vocab-from', [CompletionResultType]::ParameterName, 'Take the tokenizer of this GGUF model (its tokens, merges, special ids, chat template) instead of synthesizing one: the model shares its vocabulary (a tiny draft model for it). The vocabulary size is its token count')
            [CompletionResult]::new('--tied-embeddings', '--tied-embeddings', [CompletionResultType]::ParameterName, 'Reuse the token embedding as the output head (no `output.weight`)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'swactor;model;quantize' {
            [CompletionResult]::new('--in', '--in', [CompletionResultType]::ParameterName, 'The GGUF model to read')
            [CompletionResult]::new('--out', '--out', [CompletionResultType]::ParameterName, 'Where to write the re-quantized model')
            [CompletionResult]::new('--dtype', '--dtype', [CompletionResultType]::ParameterName, 'Target type: f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, a K-quant mix as llama.cpp makes it: q4_k_m, q5_k_m (Q6_K where more bits pay), or mxfp4_moe (routed experts in MXFP4, the rest Q8_0). Routers stay as they are')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;model;tokenize' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model whose tokenizer is used')
            [CompletionResult]::new('--text', '--text', [CompletionResultType]::ParameterName, 'The text (repeat the flag for several texts: one line of ids each)')
            [CompletionResult]::new('--add-special', '--add-special', [CompletionResultType]::ParameterName, 'Add the model''s bos token where its tokenizer does')
            [CompletionResult]::new('--parse-special', '--parse-special', [CompletionResultType]::ParameterName, 'Match control tokens written in the text (`<|im_start|>`, `<start_of_turn>`, ...)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;model;help' {
            [CompletionResult]::new('inspect', 'inspect', [CompletionResultType]::ParameterValue, 'Print the facts of a GGUF model: shape, tokenizer, rope, tensor bytes')
            [CompletionResult]::new('synth', 'synth', [CompletionResultType]::ParameterValue, 'Write a deterministic tiny model of any supported family (`--arch`) with random weights and a real BPE vocabulary')
            [CompletionResult]::new('quantize', 'quantize', [CompletionResultType]::ParameterValue, 'Re-quantize a model''s weight matrices (norms stay f32)')
            [CompletionResult]::new('tokenize', 'tokenize', [CompletionResultType]::ParameterValue, 'Print the token ids of a text as the model''s tokenizer splits it (`--json`: the ids and each token''s text)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;model;help;inspect' {
            break
        }
        'swactor;model;help;synth' {
            break
        }
        'swactor;model;help;quantize' {
            break
        }
        'swactor;model;help;tokenize' {
            break
        }
        'swactor;model;help;help' {
            break
        }
        'swactor;node' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('id', 'id', [CompletionResultType]::ParameterValue, 'Print this node''s identity (endpoint id) from its key file, creating the key (0600) on first use. The endpoint id is what pool files name')
            [CompletionResult]::new('boot', 'boot', [CompletionResultType]::ParameterValue, 'Boot this host as a pool node (identity, arena, worker, iroh endpoint, SWIM, control inbox, admin socket) and serve until SIGINT or SIGTERM')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;node;id' {
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The node''s key file')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;node;boot' {
            [CompletionResult]::new('--node-id', '--node-id', [CompletionResultType]::ParameterName, 'This node''s id, as the pool file names it')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The node''s key file (created 0600 on first boot)')
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'iroh (QUIC) listen address')
            [CompletionResult]::new('--swim', '--swim', [CompletionResultType]::ParameterName, 'SWIM (UDP) listen address')
            [CompletionResult]::new('--swim-rtt-ms', '--swim-rtt-ms', [CompletionResultType]::ParameterName, 'The longest round trip between pool members, milliseconds, for SWIM''s probe timings (members on wide-area links or behind relays: each probe waits 1.5 times it; up to 40 the LAN profile, failure detection in under a second)')
            [CompletionResult]::new('--advertise', '--advertise', [CompletionResultType]::ParameterName, 'The address other hosts reach this one at, when listening on an unspecified address (default: the local address of the route toward the pool''s nodes / join seeds; never `0.0.0.0`)')
            [CompletionResult]::new('--relay', '--relay', [CompletionResultType]::ParameterName, 'An iroh relay to reach peers through when no direct path exists, and to be reached through: `http://HOST:PORT` or `https://HOST[:PORT]`, e.g. one `swactor relay serve` runs (repeatable; the first is this host''s home relay). iroh moves a relayed connection to a direct path when one works')
            [CompletionResult]::new('--relay-ca', '--relay-ca', [CompletionResultType]::ParameterName, 'A PEM certificate an HTTPS relay''s certificate may chain to, beside the public roots (a relay serving a certificate of its own, e.g. self-signed)')
            [CompletionResult]::new('--join', '--join', [CompletionResultType]::ParameterName, 'SWIM addresses of other members to join through (repeatable): `HOST:PORT`, or a relay-only member''s `relay:<endpoint id>@<relay url>` as it prints it')
            [CompletionResult]::new('--orchestrator', '--orchestrator', [CompletionResultType]::ParameterName, 'The orchestrator''s endpoint id: the only peer allowed to control this node')
            [CompletionResult]::new('--arena-bytes', '--arena-bytes', [CompletionResultType]::ParameterName, 'Arena size in bytes')
            [CompletionResult]::new('--memory-bytes', '--memory-bytes', [CompletionResultType]::ParameterName, 'Memory this node can give a stage (weights, KV cache, rings), reported in `node_available` [default: the host''s available memory]')
            [CompletionResult]::new('--prompt-cache-bytes', '--prompt-cache-bytes', [CompletionResultType]::ParameterName, 'The most bytes this node''s stage may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables), reported in `node_available`; with the orchestrator''s `--prompt-cache-bytes` too, the smaller holds [default: the orchestrator''s budget]')
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'Where the stage computes: `cpu`, or `cuda:N` (an NVIDIA GPU; needs a build with the `cuda` feature). Checked at boot: a build without CUDA or a missing device faults the boot (`device_unavailable`, exit 6). Reported in `node_available`')
            [CompletionResult]::new('--threads', '--threads', [CompletionResultType]::ParameterName, 'Compute threads of the worker''s stage (`--worker-threads` is an older name; one node per host, its one worker using the host''s cores) [default: every CPU this process may use]')
            [CompletionResult]::new('--admin', '--admin', [CompletionResultType]::ParameterName, 'Admin socket for `swactor edge inspect` [default: swactor-node-ID-KEY.sock in the runtime or temporary directory, KEY being the first 16 digits of the endpoint id]. An existing file there is never touched: only a stale socket is replaced')
            [CompletionResult]::new('--cache', '--cache', [CompletionResultType]::ParameterName, 'Directory for downloaded weights (default: $XDG_CACHE_HOME/swactor/weights)')
            [CompletionResult]::new('--boot-timeout-ms', '--boot-timeout-ms', [CompletionResultType]::ParameterName, 'Milliseconds the boot may take; past it the node faults with the resource it was waiting for (exit 6)')
            [CompletionResult]::new('--max-worker-restarts', '--max-worker-restarts', [CompletionResultType]::ParameterName, 'Restarts of a crashed worker before the node faults and stops [default: any number]')
            [CompletionResult]::new('--relay-only', '--relay-only', [CompletionResultType]::ParameterName, 'Use the relays alone: open no QUIC port (for a host that must not expose one)')
            [CompletionResult]::new('--no-calibrate', '--no-calibrate', [CompletionResultType]::ParameterName, 'Do not measure this host''s speed at boot: the node reports none, and a plan over it balances by memory and predicts no speed (`run local`''s nodes, which share a host, boot so)')
            [CompletionResult]::new('--stop-on-stdin-eof', '--stop-on-stdin-eof', [CompletionResultType]::ParameterName, 'Stop when standard input closes (for supervisors such as `run local`)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;node;help' {
            [CompletionResult]::new('id', 'id', [CompletionResultType]::ParameterValue, 'Print this node''s identity (endpoint id) from its key file, creating the key (0600) on first use. The endpoint id is what pool files name')
            [CompletionResult]::new('boot', 'boot', [CompletionResultType]::ParameterValue, 'Boot this host as a pool node (identity, arena, worker, iroh endpoint, SWIM, control inbox, admin socket) and serve until SIGINT or SIGTERM')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;node;help;id' {
            break
        }
        'swactor;node;help;boot' {
            break
        }
        'swactor;node;help;help' {
            break
        }
        'swactor;edge' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('inspect', 'inspect', [CompletionResultType]::ParameterValue, 'Show a node''s edge records (state, ring, peers) and what it sees of the pool')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;edge;inspect' {
            [CompletionResult]::new('--node', '--node', [CompletionResultType]::ParameterName, 'The node''s admin socket')
            [CompletionResult]::new('--edge', '--edge', [CompletionResultType]::ParameterName, 'Show only this edge')
            [CompletionResult]::new('--timeout-ms', '--timeout-ms', [CompletionResultType]::ParameterName, 'Milliseconds to wait for the node''s answer')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;edge;help' {
            [CompletionResult]::new('inspect', 'inspect', [CompletionResultType]::ParameterValue, 'Show a node''s edge records (state, ring, peers) and what it sees of the pool')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;edge;help;inspect' {
            break
        }
        'swactor;edge;help;help' {
            break
        }
        'swactor;cache' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List the downloaded weights: file, kind (whole or a stage''s ranges), size, URL, sha256')
            [CompletionResult]::new('clear', 'clear', [CompletionResultType]::ParameterValue, 'Remove the downloaded weights (only the cache''s own files in the directory)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;cache;ls' {
            [CompletionResult]::new('--cache', '--cache', [CompletionResultType]::ParameterName, 'The weights cache directory, as given to `node boot --cache` (default: $XDG_CACHE_HOME/swactor/weights)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;cache;clear' {
            [CompletionResult]::new('--cache', '--cache', [CompletionResultType]::ParameterName, 'The weights cache directory, as given to `node boot --cache` (default: $XDG_CACHE_HOME/swactor/weights)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;cache;help' {
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List the downloaded weights: file, kind (whole or a stage''s ranges), size, URL, sha256')
            [CompletionResult]::new('clear', 'clear', [CompletionResultType]::ParameterValue, 'Remove the downloaded weights (only the cache''s own files in the directory)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;cache;help;ls' {
            break
        }
        'swactor;cache;help;clear' {
            break
        }
        'swactor;cache;help;help' {
            break
        }
        'swactor;pool' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('watch', 'watch', [CompletionResultType]::ParameterValue, 'Observe a pool read-only: connect to every node of a pool file with the orchestrator''s delegation (never as the orchestrator), and report availability, liveness as the nodes'' SWIM sees it, and pool readiness (ready = every node available, live and unchanged for the convergence window). Safe beside a run')
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Write a pool file from what the nodes printed: the `node_available` lines of `node boot --json` (from files, or standard input), so nobody copies endpoint ids by hand. Each node''s reported memory becomes its `memory_bytes` (left out when it reported none: `orchestrate pool` then takes the node''s report); the pool is checked as `run plan` checks a pool file')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;pool;watch' {
            [CompletionResult]::new('--pool', '--pool', [CompletionResultType]::ParameterName, 'The pool file')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The orchestrator''s key file (nodes were started with its endpoint id). It only vouches for the watch, which holds a key of its own and observes read-only: it may run beside `orchestrate pool` with the same file')
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'iroh listen address (the watch only connects out; it joins no membership)')
            [CompletionResult]::new('--relay', '--relay', [CompletionResultType]::ParameterName, 'An iroh relay to reach peers through when no direct path exists, and to be reached through: `http://HOST:PORT` or `https://HOST[:PORT]`, e.g. one `swactor relay serve` runs (repeatable; the first is this host''s home relay). iroh moves a relayed connection to a direct path when one works')
            [CompletionResult]::new('--relay-ca', '--relay-ca', [CompletionResultType]::ParameterName, 'A PEM certificate an HTTPS relay''s certificate may chain to, beside the public roots (a relay serving a certificate of its own, e.g. self-signed)')
            [CompletionResult]::new('--window-ms', '--window-ms', [CompletionResultType]::ParameterName, 'Convergence window in milliseconds')
            [CompletionResult]::new('--pool-timeout', '--pool-timeout', [CompletionResultType]::ParameterName, 'Give up (exit 8) when the pool is not ready within S seconds [default: wait on]')
            [CompletionResult]::new('--relay-only', '--relay-only', [CompletionResultType]::ParameterName, 'Use the relays alone: open no QUIC port (for a host that must not expose one)')
            [CompletionResult]::new('--until-ready', '--until-ready', [CompletionResultType]::ParameterName, 'Exit once the pool is ready')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;pool;init' {
            [CompletionResult]::new('--orchestrator-node-id', '--orchestrator-node-id', [CompletionResultType]::ParameterName, 'The orchestrator''s node id in the pool')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;pool;help' {
            [CompletionResult]::new('watch', 'watch', [CompletionResultType]::ParameterValue, 'Observe a pool read-only: connect to every node of a pool file with the orchestrator''s delegation (never as the orchestrator), and report availability, liveness as the nodes'' SWIM sees it, and pool readiness (ready = every node available, live and unchanged for the convergence window). Safe beside a run')
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Write a pool file from what the nodes printed: the `node_available` lines of `node boot --json` (from files, or standard input), so nobody copies endpoint ids by hand. Each node''s reported memory becomes its `memory_bytes` (left out when it reported none: `orchestrate pool` then takes the node''s report); the pool is checked as `run plan` checks a pool file')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;pool;help;watch' {
            break
        }
        'swactor;pool;help;init' {
            break
        }
        'swactor;pool;help;help' {
            break
        }
        'swactor;relay' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serve an iroh relay for the pool''s hosts behind NAT (nodes and orchestrators name it with `--relay URL`), until SIGINT or SIGTERM. Plain HTTP without a certificate (tests, trusted networks), HTTPS with `--cert` and `--key`')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;relay;serve' {
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'Where the relay listens (TCP)')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'The host name (or IP) in the relay''s URL, as the pool''s hosts reach it (default: the listen address''s IP; must match the certificate with `--cert`)')
            [CompletionResult]::new('--cert', '--cert', [CompletionResultType]::ParameterName, 'The certificate chain (PEM) to serve HTTPS with')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'The certificate''s private key (PEM)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;relay;help' {
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serve an iroh relay for the pool''s hosts behind NAT (nodes and orchestrators name it with `--relay URL`), until SIGINT or SIGTERM. Plain HTTP without a certificate (tests, trusted networks), HTTPS with `--cert` and `--key`')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;relay;help;serve' {
            break
        }
        'swactor;relay;help;help' {
            break
        }
        'swactor;chat' {
            [CompletionResult]::new('--system', '--system', [CompletionResultType]::ParameterName, 'A system message that opens the conversation')
            [CompletionResult]::new('--server', '--server', [CompletionResultType]::ParameterName, 'The server''s URL')
            [CompletionResult]::new('--api-key-file', '--api-key-file', [CompletionResultType]::ParameterName, 'A file holding the API key [default: $SWACTOR_API_KEY, if set]')
            [CompletionResult]::new('--max-tokens', '--max-tokens', [CompletionResultType]::ParameterName, 'Tokens to generate at most [default: the server''s]')
            [CompletionResult]::new('--temperature', '--temperature', [CompletionResultType]::ParameterName, 'Sampling temperature (0 is greedy) [default: the server''s]')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'The sampler''s seed')
            [CompletionResult]::new('--stop', '--stop', [CompletionResultType]::ParameterName, 'A string that ends the answer (repeatable)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;complete' {
            [CompletionResult]::new('--prompt', '--prompt', [CompletionResultType]::ParameterName, 'The prompt (`-` reads it from standard input)')
            [CompletionResult]::new('--server', '--server', [CompletionResultType]::ParameterName, 'The server''s URL')
            [CompletionResult]::new('--api-key-file', '--api-key-file', [CompletionResultType]::ParameterName, 'A file holding the API key [default: $SWACTOR_API_KEY, if set]')
            [CompletionResult]::new('--max-tokens', '--max-tokens', [CompletionResultType]::ParameterName, 'Tokens to generate at most [default: the server''s]')
            [CompletionResult]::new('--temperature', '--temperature', [CompletionResultType]::ParameterName, 'Sampling temperature (0 is greedy) [default: the server''s]')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'The sampler''s seed')
            [CompletionResult]::new('--stop', '--stop', [CompletionResultType]::ParameterName, 'A string that ends the answer (repeatable)')
            [CompletionResult]::new('--stream', '--stream', [CompletionResultType]::ParameterName, 'Print the text as it is generated')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('ring', 'ring', [CompletionResultType]::ParameterValue, 'Cross-process ring throughput (node producer -> ingress ring -> a real worker''s device copy) as a ratio of plain memcpy bandwidth measured in the same run')
            [CompletionResult]::new('wake', 'wake', [CompletionResultType]::ParameterValue, 'Wake round trip: a small object written into an ingress ring until the worker''s `ObjectLoaded` line is read back (median and p99)')
            [CompletionResult]::new('edge', 'edge', [CompletionResultType]::ParameterValue, 'Edge throughput (egress ring -> send pump -> QUIC -> receive pump -> ingress ring) beside raw iroh stream throughput, and the hop latency of a decode-sized object')
            [CompletionResult]::new('decode', 'decode', [CompletionResultType]::ParameterValue, 'Decode tokens/s of `swactor generate` at one compute thread: the whole model against the same model split into in-process stages, for the model and re-quantized copies of it')
            [CompletionResult]::new('pipeline', 'pipeline', [CompletionResultType]::ParameterValue, 'Decode tokens/s of a `run local` pipeline (one node process per stage, one compute thread each) against `swactor generate` at one thread, and the time from `run local`''s start to its first token')
            [CompletionResult]::new('engine', 'engine', [CompletionResultType]::ParameterValue, 'The CPU engine on one or more models (and re-quantized copies): decode and prefill tokens/s at each thread count, aggregate decode at several batch sizes, and stage load time (mapped, against candle''s copying load). `scripts/bench-llama-cpp.py` runs it beside llama.cpp')
            [CompletionResult]::new('products', 'products', [CompletionResultType]::ParameterValue, 'The engine''s matrix products one at a time on a model''s own weights: time per product against the bytes it reads and this machine''s memory read bandwidth (measured in the same run), beside the whole forward pass, for a decode step and prefills')
            [CompletionResult]::new('speculate', 'speculate', [CompletionResultType]::ParameterValue, 'Speculative decoding: one sequence''s decode tokens/s with and without n-gram drafts, in one process and through a `run local` pipeline, on a grounded workload (text the answer repeats or edits) and on free generation, each pair side by side')
            [CompletionResult]::new('failover', 'failover', [CompletionResultType]::ParameterValue, 'Fault detection: SIGKILLs a stage node of a local pipeline mid-decode and measures the time to `run_faulted` and to `run_torn_down`')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serving: a `run local` session with 1, 2, 4, 8 and 16 concurrent greedy requests (aggregate decode tokens/s, time to first token and inter-token latency p50 / p95) beside one-sequence `swactor generate` with the same total compute threads')
            [CompletionResult]::new('prefix', 'prefix', [CompletionResultType]::ParameterValue, 'The prefix cache: a multi-turn conversation served by `run local --serve` (each turn a completion of the transcript so far), each turn sent with the cache and again with `cache_prompt: false` (time to first token, cached tokens per turn), then conversations sharing a long system prompt at once, with and without it (aggregate tokens/s)')
            [CompletionResult]::new('structured', 'structured', [CompletionResultType]::ParameterValue, 'Constrained output: the same chat prompts with a JSON schema in `response_format` and without, side by side in one server; decode tokens/s of each and their ratio, and how many constrained replies parsed with the schema''s keys')
            [CompletionResult]::new('wan', 'wan', [CompletionResultType]::ParameterValue, 'Wide-area links: a pipeline of node processes (one compute thread each), each host in its own network namespace behind a link of each round trip (`util wan-link`), and relay-only through a relay, with and without n-gram speculation; decode tokens/s and time to first token measured beside what the plan predicted, and their ratio. Needs root (network namespaces, iptables)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;bench;ring' {
            [CompletionResult]::new('--ring-mib', '--ring-mib', [CompletionResultType]::ParameterName, 'Ring data capacity in MiB (the planner''s largest activation ring)')
            [CompletionResult]::new('--span-kib', '--span-kib', [CompletionResultType]::ParameterName, 'Bytes the producer writes at a time, in KiB')
            [CompletionResult]::new('--object-mib', '--object-mib', [CompletionResultType]::ParameterName, 'Object size in MiB')
            [CompletionResult]::new('--total-mib', '--total-mib', [CompletionResultType]::ParameterName, 'Bytes to stream in MiB')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;wake' {
            [CompletionResult]::new('--samples', '--samples', [CompletionResultType]::ParameterName, 'Round trips to measure')
            [CompletionResult]::new('--bytes', '--bytes', [CompletionResultType]::ParameterName, 'Object payload bytes (a multiple of 4)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;edge' {
            [CompletionResult]::new('--mib', '--mib', [CompletionResultType]::ParameterName, 'MiB to stream in each throughput run')
            [CompletionResult]::new('--object-bytes', '--object-bytes', [CompletionResultType]::ParameterName, 'Object size of the latency run (a decode-sized activation by default)')
            [CompletionResult]::new('--samples', '--samples', [CompletionResultType]::ParameterName, 'Latency samples')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;decode' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model; again for more models, measured one after another in the same run (`--requantize` copies the first)')
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Stages of the split run')
            [CompletionResult]::new('--tokens', '--tokens', [CompletionResultType]::ParameterName, 'Tokens to generate per run')
            [CompletionResult]::new('--requantize', '--requantize', [CompletionResultType]::ParameterName, 'Also measure copies re-quantized to these types (e.g. `q8_0,q4_0`)')
            [CompletionResult]::new('--repeat', '--repeat', [CompletionResultType]::ParameterName, 'Runs of each configuration (the best is kept)')
            [CompletionResult]::new('--synth-1b', '--synth-1b', [CompletionResultType]::ParameterName, 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`: 22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000, Q4_0): figures at a real size beside the model''s')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;pipeline' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model; again for more models, measured one after another in the same run (`--requantize` copies the first)')
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Stages of the split run')
            [CompletionResult]::new('--tokens', '--tokens', [CompletionResultType]::ParameterName, 'Tokens to generate per run')
            [CompletionResult]::new('--requantize', '--requantize', [CompletionResultType]::ParameterName, 'Also measure copies re-quantized to these types (e.g. `q8_0,q4_0`)')
            [CompletionResult]::new('--repeat', '--repeat', [CompletionResultType]::ParameterName, 'Runs of each configuration (the best is kept)')
            [CompletionResult]::new('--synth-1b', '--synth-1b', [CompletionResultType]::ParameterName, 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`: 22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000, Q4_0): figures at a real size beside the model''s')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;engine' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'A GGUF model (repeatable)')
            [CompletionResult]::new('--requantize', '--requantize', [CompletionResultType]::ParameterName, 'Also measure copies of the first model re-quantized to these types (e.g. `q8_0,q4_0,q4_k`)')
            [CompletionResult]::new('--threads', '--threads', [CompletionResultType]::ParameterName, 'Compute thread counts to measure')
            [CompletionResult]::new('--tokens', '--tokens', [CompletionResultType]::ParameterName, 'Tokens decoded per run')
            [CompletionResult]::new('--prompt-tokens', '--prompt-tokens', [CompletionResultType]::ParameterName, 'Lengths of the prefill prompts (one prefill measured at each)')
            [CompletionResult]::new('--batch', '--batch', [CompletionResultType]::ParameterName, 'Batch sizes of the aggregate decode')
            [CompletionResult]::new('--repeat', '--repeat', [CompletionResultType]::ParameterName, 'Runs of each measurement (the best is kept)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;products' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model')
            [CompletionResult]::new('--formats', '--formats', [CompletionResultType]::ParameterName, 'Instead of a model''s products: each of these weight formats'' single-row product on a `--cols`-wide matrix of pseudo-random weights resident in cache (`all`: every format the engine reads)')
            [CompletionResult]::new('--cols', '--cols', [CompletionResultType]::ParameterName, 'With `--formats`: input columns of each matrix (a multiple of 256)')
            [CompletionResult]::new('--threads', '--threads', [CompletionResultType]::ParameterName, 'Compute thread counts to measure')
            [CompletionResult]::new('--rows', '--rows', [CompletionResultType]::ParameterName, 'Activation rows of each forward pass measured (1: a decode step; more: a prefill)')
            [CompletionResult]::new('--repeat', '--repeat', [CompletionResultType]::ParameterName, 'Runs of each measurement (the best is kept)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;speculate' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model')
            [CompletionResult]::new('--grounded', '--grounded', [CompletionResultType]::ParameterName, 'The grounded workload: JSON Lines of `{"prompt", "max_tokens"}`')
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Stages of the pipeline layout')
            [CompletionResult]::new('--tokens', '--tokens', [CompletionResultType]::ParameterName, 'Tokens per free-generation prompt')
            [CompletionResult]::new('--free', '--free', [CompletionResultType]::ParameterName, 'Free-generation prompts (story openings)')
            [CompletionResult]::new('--draft-model', '--draft-model', [CompletionResultType]::ParameterName, 'Draft with this model (same vocabulary) instead of n-gram lookup')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;failover' {
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Stages of the local pipeline (node 2 is killed)')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'With `--resume`: the GGUF model served')
            [CompletionResult]::new('--sequences', '--sequences', [CompletionResultType]::ParameterName, 'With `--resume`: requests in flight, each a series')
            [CompletionResult]::new('--tokens', '--tokens', [CompletionResultType]::ParameterName, 'With `--resume`: tokens each request generates')
            [CompletionResult]::new('--kill-after', '--kill-after', [CompletionResultType]::ParameterName, 'With `--resume`: tokens every request has when node 2 is killed (a longer history is a longer replay)')
            [CompletionResult]::new('--repeat', '--repeat', [CompletionResultType]::ParameterName, 'Runs (each on a fresh local pool)')
            [CompletionResult]::new('--resume', '--resume', [CompletionResultType]::ParameterName, 'Resume instead of failing: the session re-forms over a spare node and, in a second series, over the survivors alone; the time from the kill to the first resumed token and its parts')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;serve' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model; again for more models, measured one after another in the same run (`--requantize` copies the first)')
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Stages of the session (one node process each)')
            [CompletionResult]::new('--layout', '--layout', [CompletionResultType]::ParameterName, 'How the stages share this host''s cores (`run local --layout`)')
            [CompletionResult]::new('--threads', '--threads', [CompletionResultType]::ParameterName, 'Compute threads of each stage worker (the baselines get every core of the host) [default: the layout''s]')
            [CompletionResult]::new('--tokens', '--tokens', [CompletionResultType]::ParameterName, 'Tokens each request generates')
            [CompletionResult]::new('--concurrency', '--concurrency', [CompletionResultType]::ParameterName, 'Concurrency levels')
            [CompletionResult]::new('--requantize', '--requantize', [CompletionResultType]::ParameterName, 'Also measure copies re-quantized to these types (e.g. `q8_0`)')
            [CompletionResult]::new('--groups', '--groups', [CompletionResultType]::ParameterName, 'Micro-batches in flight at most (`run local --groups`) [default: the layout''s]')
            [CompletionResult]::new('--prefill-budget-ms', '--prefill-budget-ms', [CompletionResultType]::ParameterName, 'The session''s prefill time budget (`run local --prefill-budget-ms`) [default: the session''s]')
            [CompletionResult]::new('--repeat', '--repeat', [CompletionResultType]::ParameterName, 'Runs per level (each a batch job and, with --http, the same through HTTP, one after the other); the medians are printed')
            [CompletionResult]::new('--synth-1b', '--synth-1b', [CompletionResultType]::ParameterName, 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`: 22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000, Q4_0): figures at a real size beside the model''s')
            [CompletionResult]::new('--http', '--http', [CompletionResultType]::ParameterName, 'Also serve each level through the HTTP API (`run local --serve`, N concurrent streamed completions measured by the client) beside the batch job''s figures')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'swactor;bench;prefix' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model; again for more models, measured one after another in the same run')
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Stages of the session (one node process each)')
            [CompletionResult]::new('--threads', '--threads', [CompletionResultType]::ParameterName, 'Compute threads of each stage worker')
            [CompletionResult]::new('--turns', '--turns', [CompletionResultType]::ParameterName, 'Turns of the conversation')
            [CompletionResult]::new('--turn-words', '--turn-words', [CompletionResultType]::ParameterName, 'Words of user text each turn adds (about a token each)')
            [CompletionResult]::new('--reply-tokens', '--reply-tokens', [CompletionResultType]::ParameterName, 'Tokens each reply generates at most')
            [CompletionResult]::new('--conversations', '--conversations', [CompletionResultType]::ParameterName, 'Conversations at once sharing one system prompt (0: that part is skipped)')
            [CompletionResult]::new('--system-words', '--system-words', [CompletionResultType]::ParameterName, 'Words of the shared system prompt')
            [CompletionResult]::new('--shared-turns', '--shared-turns', [CompletionResultType]::ParameterName, 'Turns of each of those conversations (and of the crowded part''s)')
            [CompletionResult]::new('--crowd', '--crowd', [CompletionResultType]::ParameterName, 'Conversations taking turns one after another, twice as many as the slots by default, so that each finds its history in the stages'' block stores, not in its slot (0: that part is skipped)')
            [CompletionResult]::new('--max-seq-len', '--max-seq-len', [CompletionResultType]::ParameterName, 'Each sequence''s context [default: the server''s: the model''s trained length as far as memory holds it]')
            [CompletionResult]::new('--synth-1b', '--synth-1b', [CompletionResultType]::ParameterName, 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`), at a real size beside the model''s')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;structured' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model; again for more models, measured one after another in the same run')
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Stages of the session (one node process each)')
            [CompletionResult]::new('--threads', '--threads', [CompletionResultType]::ParameterName, 'Compute threads of each stage worker')
            [CompletionResult]::new('--requests', '--requests', [CompletionResultType]::ParameterName, 'Requests of each kind (constrained and free), in turns')
            [CompletionResult]::new('--max-tokens', '--max-tokens', [CompletionResultType]::ParameterName, 'Tokens each reply generates at most (enough for the schema''s bounded object)')
            [CompletionResult]::new('--synth-1b', '--synth-1b', [CompletionResultType]::ParameterName, 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`; its text is noise, but the schema still holds it)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;wan' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The GGUF model')
            [CompletionResult]::new('--stages', '--stages', [CompletionResultType]::ParameterName, 'Stages (one host namespace and node process each)')
            [CompletionResult]::new('--loss', '--loss', [CompletionResultType]::ParameterName, 'Share of datagrams each link loses each way, 0..=1')
            [CompletionResult]::new('--rate-mbit', '--rate-mbit', [CompletionResultType]::ParameterName, 'Megabits per second each link carries each way (default: unlimited; not the relay)')
            [CompletionResult]::new('--links', '--links', [CompletionResultType]::ParameterName, 'The links: `direct`, a round trip in milliseconds, or `relay`')
            [CompletionResult]::new('--tokens', '--tokens', [CompletionResultType]::ParameterName, 'Tokens to generate per run')
            [CompletionResult]::new('--prompt', '--prompt', [CompletionResultType]::ParameterName, 'The prompt (by default one whose answer repeats it, where n-gram drafts land)')
            [CompletionResult]::new('--no-speculate', '--no-speculate', [CompletionResultType]::ParameterName, 'Leave out the runs with n-gram speculation')
            [CompletionResult]::new('--mixed', '--mixed', [CompletionResultType]::ParameterName, 'Also run nodes of different speed (every host but the first on the scalar kernels) with ranges balanced by speed and by memory, side by side')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON Lines (one object per line with a `type` tag) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'swactor;bench;help' {
            [CompletionResult]::new('ring', 'ring', [CompletionResultType]::ParameterValue, 'Cross-process ring throughput (node producer -> ingress ring -> a real worker''s device copy) as a ratio of plain memcpy bandwidth measured in the same run')
            [CompletionResult]::new('wake', 'wake', [CompletionResultType]::ParameterValue, 'Wake round trip: a small object written into an ingress ring until the worker''s `ObjectLoaded` line is read back (median and p99)')
            [CompletionResult]::new('edge', 'edge', [CompletionResultType]::ParameterValue, 'Edge throughput (egress ring -> send pump -> QUIC -> receive pump -> ingress ring) beside raw iroh stream throughput, and the hop latency of a decode-sized object')
            [CompletionResult]::new('decode', 'decode', [CompletionResultType]::ParameterValue, 'Decode tokens/s of `swactor generate` at one compute thread: the whole model against the same model split into in-process stages, for the model and re-quantized copies of it')
            [CompletionResult]::new('pipeline', 'pipeline', [CompletionResultType]::ParameterValue, 'Decode tokens/s of a `run local` pipeline (one node process per stage, one compute thread each) against `swactor generate` at one thread, and the time from `run local`''s start to its first token')
            [CompletionResult]::new('engine', 'engine', [CompletionResultType]::ParameterValue, 'The CPU engine on one or more models (and re-quantized copies): decode and prefill tokens/s at each thread count, aggregate decode at several batch sizes, and stage load time (mapped, against candle''s copying load). `scripts/bench-llama-cpp.py` runs it beside llama.cpp')
            [CompletionResult]::new('products', 'products', [CompletionResultType]::ParameterValue, 'The engine''s matrix products one at a time on a model''s own weights: time per product against the bytes it reads and this machine''s memory read bandwidth (measured in the same run), beside the whole forward pass, for a decode step and prefills')
            [CompletionResult]::new('speculate', 'speculate', [CompletionResultType]::ParameterValue, 'Speculative decoding: one sequence''s decode tokens/s with and without n-gram drafts, in one process and through a `run local` pipeline, on a grounded workload (text the answer repeats or edits) and on free generation, each pair side by side')
            [CompletionResult]::new('failover', 'failover', [CompletionResultType]::ParameterValue, 'Fault detection: SIGKILLs a stage node of a local pipeline mid-decode and measures the time to `run_faulted` and to `run_torn_down`')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serving: a `run local` session with 1, 2, 4, 8 and 16 concurrent greedy requests (aggregate decode tokens/s, time to first token and inter-token latency p50 / p95) beside one-sequence `swactor generate` with the same total compute threads')
            [CompletionResult]::new('prefix', 'prefix', [CompletionResultType]::ParameterValue, 'The prefix cache: a multi-turn conversation served by `run local --serve` (each turn a completion of the transcript so far), each turn sent with the cache and again with `cache_prompt: false` (time to first token, cached tokens per turn), then conversations sharing a long system prompt at once, with and without it (aggregate tokens/s)')
            [CompletionResult]::new('structured', 'structured', [CompletionResultType]::ParameterValue, 'Constrained output: the same chat prompts with a JSON schema in `response_format` and without, side by side in one server; decode tokens/s of each and their ratio, and how many constrained replies parsed with the schema''s keys')
            [CompletionResult]::new('wan', 'wan', [CompletionResultType]::ParameterValue, 'Wide-area links: a pipeline of node processes (one compute thread each), each host in its own network namespace behind a link of each round trip (`util wan-link`), and relay-only through a relay, with and without n-gram speculation; decode tokens/s and time to first token measured beside what the plan predicted, and their ratio. Needs root (network namespaces, iptables)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;bench;help;ring' {
            break
        }
        'swactor;bench;help;wake' {
            break
        }
        'swactor;bench;help;edge' {
            break
        }
        'swactor;bench;help;decode' {
            break
        }
        'swactor;bench;help;pipeline' {
            break
        }
        'swactor;bench;help;engine' {
            break
        }
        'swactor;bench;help;products' {
            break
        }
        'swactor;bench;help;speculate' {
            break
        }
        'swactor;bench;help;failover' {
            break
        }
        'swactor;bench;help;serve' {
            break
        }
        'swactor;bench;help;prefix' {
            break
        }
        'swactor;bench;help;structured' {
            break
        }
        'swactor;bench;help;wan' {
            break
        }
        'swactor;bench;help;help' {
            break
        }
        'swactor;help' {
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run a whole pipeline on this machine (`run local`), or plan one over a pool (`run plan`)')
            [CompletionResult]::new('generate', 'generate', [CompletionResultType]::ParameterValue, 'Generate text with a whole model in this one process (the pipeline''s reference)')
            [CompletionResult]::new('orchestrate', 'orchestrate', [CompletionResultType]::ParameterValue, 'Run a prompt through a pool of `swactor node boot` hosts')
            [CompletionResult]::new('model', 'model', [CompletionResultType]::ParameterValue, 'Inspect and synthesize GGUF models')
            [CompletionResult]::new('node', 'node', [CompletionResultType]::ParameterValue, 'Run this host as a pool node, or print its identity')
            [CompletionResult]::new('edge', 'edge', [CompletionResultType]::ParameterValue, 'Inspect the live edges of a node')
            [CompletionResult]::new('cache', 'cache', [CompletionResultType]::ParameterValue, 'List or clear a node''s downloaded weights')
            [CompletionResult]::new('pool', 'pool', [CompletionResultType]::ParameterValue, 'Watch a pool from the orchestrator''s side')
            [CompletionResult]::new('relay', 'relay', [CompletionResultType]::ParameterValue, 'Host an iroh relay for pool members behind NAT')
            [CompletionResult]::new('chat', 'chat', [CompletionResultType]::ParameterValue, 'Chat with a swactor server: an interactive loop on a terminal (the conversation is kept), one exchange from standard input otherwise')
            [CompletionResult]::new('complete', 'complete', [CompletionResultType]::ParameterValue, 'Ask a swactor server to complete a prompt; the text on stdout (streamed with --stream), the whole response with --json')
            [CompletionResult]::new('bench', 'bench', [CompletionResultType]::ParameterValue, 'Measure the data plane on this machine (each figure beside its baseline)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'swactor;help;run' {
            [CompletionResult]::new('plan', 'plan', [CompletionResultType]::ParameterValue, 'Plan a run over a pool and predict its resources, without running anything')
            [CompletionResult]::new('local', 'local', [CompletionResultType]::ParameterValue, 'Run a whole pipeline on this machine: N `swactor node boot` children on loopback, the orchestrator in this process; prints the generated text and cleans up')
            break
        }
        'swactor;help;run;plan' {
            break
        }
        'swactor;help;run;local' {
            break
        }
        'swactor;help;generate' {
            break
        }
        'swactor;help;orchestrate' {
            [CompletionResult]::new('pool', 'pool', [CompletionResultType]::ParameterValue, 'Wait for the pool to be ready, plan, provision every stage, inject the prompt, stream the generated text, and tear the run down')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serve the OpenAI-compatible HTTP API over the pool: form a session when the pool is ready, serve while it lasts, form a new one after a fault; SIGINT / SIGTERM drain within --grace-s and exit 0')
            break
        }
        'swactor;help;orchestrate;pool' {
            break
        }
        'swactor;help;orchestrate;serve' {
            break
        }
        'swactor;help;model' {
            [CompletionResult]::new('inspect', 'inspect', [CompletionResultType]::ParameterValue, 'Print the facts of a GGUF model: shape, tokenizer, rope, tensor bytes')
            [CompletionResult]::new('synth', 'synth', [CompletionResultType]::ParameterValue, 'Write a deterministic tiny model of any supported family (`--arch`) with random weights and a real BPE vocabulary')
            [CompletionResult]::new('quantize', 'quantize', [CompletionResultType]::ParameterValue, 'Re-quantize a model''s weight matrices (norms stay f32)')
            [CompletionResult]::new('tokenize', 'tokenize', [CompletionResultType]::ParameterValue, 'Print the token ids of a text as the model''s tokenizer splits it (`--json`: the ids and each token''s text)')
            break
        }
        'swactor;help;model;inspect' {
            break
        }
        'swactor;help;model;synth' {
            break
        }
        'swactor;help;model;quantize' {
            break
        }
        'swactor;help;model;tokenize' {
            break
        }
        'swactor;help;node' {
            [CompletionResult]::new('id', 'id', [CompletionResultType]::ParameterValue, 'Print this node''s identity (endpoint id) from its key file, creating the key (0600) on first use. The endpoint id is what pool files name')
            [CompletionResult]::new('boot', 'boot', [CompletionResultType]::ParameterValue, 'Boot this host as a pool node (identity, arena, worker, iroh endpoint, SWIM, control inbox, admin socket) and serve until SIGINT or SIGTERM')
            break
        }
        'swactor;help;node;id' {
            break
        }
        'swactor;help;node;boot' {
            break
        }
        'swactor;help;edge' {
            [CompletionResult]::new('inspect', 'inspect', [CompletionResultType]::ParameterValue, 'Show a node''s edge records (state, ring, peers) and what it sees of the pool')
            break
        }
        'swactor;help;edge;inspect' {
            break
        }
        'swactor;help;cache' {
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List the downloaded weights: file, kind (whole or a stage''s ranges), size, URL, sha256')
            [CompletionResult]::new('clear', 'clear', [CompletionResultType]::ParameterValue, 'Remove the downloaded weights (only the cache''s own files in the directory)')
            break
        }
        'swactor;help;cache;ls' {
            break
        }
        'swactor;help;cache;clear' {
            break
        }
        'swactor;help;pool' {
            [CompletionResult]::new('watch', 'watch', [CompletionResultType]::ParameterValue, 'Observe a pool read-only: connect to every node of a pool file with the orchestrator''s delegation (never as the orchestrator), and report availability, liveness as the nodes'' SWIM sees it, and pool readiness (ready = every node available, live and unchanged for the convergence window). Safe beside a run')
            [CompletionResult]::new('init', 'init', [CompletionResultType]::ParameterValue, 'Write a pool file from what the nodes printed: the `node_available` lines of `node boot --json` (from files, or standard input), so nobody copies endpoint ids by hand. Each node''s reported memory becomes its `memory_bytes` (left out when it reported none: `orchestrate pool` then takes the node''s report); the pool is checked as `run plan` checks a pool file')
            break
        }
        'swactor;help;pool;watch' {
            break
        }
        'swactor;help;pool;init' {
            break
        }
        'swactor;help;relay' {
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serve an iroh relay for the pool''s hosts behind NAT (nodes and orchestrators name it with `--relay URL`), until SIGINT or SIGTERM. Plain HTTP without a certificate (tests, trusted networks), HTTPS with `--cert` and `--key`')
            break
        }
        'swactor;help;relay;serve' {
            break
        }
        'swactor;help;chat' {
            break
        }
        'swactor;help;complete' {
            break
        }
        'swactor;help;bench' {
            [CompletionResult]::new('ring', 'ring', [CompletionResultType]::ParameterValue, 'Cross-process ring throughput (node producer -> ingress ring -> a real worker''s device copy) as a ratio of plain memcpy bandwidth measured in the same run')
            [CompletionResult]::new('wake', 'wake', [CompletionResultType]::ParameterValue, 'Wake round trip: a small object written into an ingress ring until the worker''s `ObjectLoaded` line is read back (median and p99)')
            [CompletionResult]::new('edge', 'edge', [CompletionResultType]::ParameterValue, 'Edge throughput (egress ring -> send pump -> QUIC -> receive pump -> ingress ring) beside raw iroh stream throughput, and the hop latency of a decode-sized object')
            [CompletionResult]::new('decode', 'decode', [CompletionResultType]::ParameterValue, 'Decode tokens/s of `swactor generate` at one compute thread: the whole model against the same model split into in-process stages, for the model and re-quantized copies of it')
            [CompletionResult]::new('pipeline', 'pipeline', [CompletionResultType]::ParameterValue, 'Decode tokens/s of a `run local` pipeline (one node process per stage, one compute thread each) against `swactor generate` at one thread, and the time from `run local`''s start to its first token')
            [CompletionResult]::new('engine', 'engine', [CompletionResultType]::ParameterValue, 'The CPU engine on one or more models (and re-quantized copies): decode and prefill tokens/s at each thread count, aggregate decode at several batch sizes, and stage load time (mapped, against candle''s copying load). `scripts/bench-llama-cpp.py` runs it beside llama.cpp')
            [CompletionResult]::new('products', 'products', [CompletionResultType]::ParameterValue, 'The engine''s matrix products one at a time on a model''s own weights: time per product against the bytes it reads and this machine''s memory read bandwidth (measured in the same run), beside the whole forward pass, for a decode step and prefills')
            [CompletionResult]::new('speculate', 'speculate', [CompletionResultType]::ParameterValue, 'Speculative decoding: one sequence''s decode tokens/s with and without n-gram drafts, in one process and through a `run local` pipeline, on a grounded workload (text the answer repeats or edits) and on free generation, each pair side by side')
            [CompletionResult]::new('failover', 'failover', [CompletionResultType]::ParameterValue, 'Fault detection: SIGKILLs a stage node of a local pipeline mid-decode and measures the time to `run_faulted` and to `run_torn_down`')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serving: a `run local` session with 1, 2, 4, 8 and 16 concurrent greedy requests (aggregate decode tokens/s, time to first token and inter-token latency p50 / p95) beside one-sequence `swactor generate` with the same total compute threads')
            [CompletionResult]::new('prefix', 'prefix', [CompletionResultType]::ParameterValue, 'The prefix cache: a multi-turn conversation served by `run local --serve` (each turn a completion of the transcript so far), each turn sent with the cache and again with `cache_prompt: false` (time to first token, cached tokens per turn), then conversations sharing a long system prompt at once, with and without it (aggregate tokens/s)')
            [CompletionResult]::new('structured', 'structured', [CompletionResultType]::ParameterValue, 'Constrained output: the same chat prompts with a JSON schema in `response_format` and without, side by side in one server; decode tokens/s of each and their ratio, and how many constrained replies parsed with the schema''s keys')
            [CompletionResult]::new('wan', 'wan', [CompletionResultType]::ParameterValue, 'Wide-area links: a pipeline of node processes (one compute thread each), each host in its own network namespace behind a link of each round trip (`util wan-link`), and relay-only through a relay, with and without n-gram speculation; decode tokens/s and time to first token measured beside what the plan predicted, and their ratio. Needs root (network namespaces, iptables)')
            break
        }
        'swactor;help;bench;ring' {
            break
        }
        'swactor;help;bench;wake' {
            break
        }
        'swactor;help;bench;edge' {
            break
        }
        'swactor;help;bench;decode' {
            break
        }
        'swactor;help;bench;pipeline' {
            break
        }
        'swactor;help;bench;engine' {
            break
        }
        'swactor;help;bench;products' {
            break
        }
        'swactor;help;bench;speculate' {
            break
        }
        'swactor;help;bench;failover' {
            break
        }
        'swactor;help;bench;serve' {
            break
        }
        'swactor;help;bench;prefix' {
            break
        }
        'swactor;help;bench;structured' {
            break
        }
        'swactor;help;bench;wan' {
            break
        }
        'swactor;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
