# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_swactor_global_optspecs
    string join \n h/help V/version
end

function __fish_swactor_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_swactor_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_swactor_using_subcommand
    set -l cmd (__fish_swactor_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c swactor -n "__fish_swactor_needs_command" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_needs_command" -s V -l version -d 'Print version'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "run" -d 'Run a whole pipeline on this machine (`run local`), or plan one over a pool (`run plan`)'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "generate" -d 'Generate text with a whole model in this one process (the pipeline\'s reference)'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "orchestrate" -d 'Run a prompt through a pool of `swactor node boot` hosts'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "model" -d 'Inspect and synthesize GGUF models'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "node" -d 'Run this host as a pool node, or print its identity'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "edge" -d 'Inspect the live edges of a node'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "cache" -d 'List or clear a node\'s downloaded weights'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "pool" -d 'Watch a pool from the orchestrator\'s side'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "chat" -d 'Chat with a swactor server: an interactive loop on a terminal (the conversation is kept), one exchange from standard input otherwise'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "complete" -d 'Ask a swactor server to complete a prompt; the text on stdout (streamed with --stream), the whole response with --json'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "bench" -d 'Measure the data plane on this machine (each figure beside its baseline)'
complete -c swactor -n "__fish_swactor_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand run; and not __fish_seen_subcommand_from plan local help" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand run; and not __fish_seen_subcommand_from plan local help" -f -a "plan" -d 'Plan a run over a pool and predict its resources, without running anything'
complete -c swactor -n "__fish_swactor_using_subcommand run; and not __fish_seen_subcommand_from plan local help" -f -a "local" -d 'Run a whole pipeline on this machine: N `swactor node boot` children on loopback, the orchestrator in this process; prints the generated text and cleans up'
complete -c swactor -n "__fish_swactor_using_subcommand run; and not __fish_seen_subcommand_from plan local help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l model -d 'The GGUF model to plan for' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l pool -d 'The pool file (TOML inventory of nodes)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l stages -d 'Number of stages [default: one per placement node, or per pool node]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l layers -d 'Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l nodes -d 'Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l prompt-tokens -d 'Prompt length assumed for the prefill predictions' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l weights-url -d 'Nodes download the weights from this `http(s)://host[:port]/path` URL instead of reading `--model`\'s path; the plan carries the size and sha256 of the local `--model` file to check them against' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l run-id -d 'The run id to write into the plan' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l max-seq-len -d 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model\'s trained context length, lowered to what the nodes\' memory holds; `run plan` says which and why]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l kv-cache -d 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)' -r -f -a "f32\t'32-bit floats'
f16\t'16-bit floats (half the KV cache memory)'"
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l activation-dtype -d 'Element type of activations between stages (f32 is bit-exact with one process)' -r -f -a "f32\t'32-bit floats (bit-exact with one process)'
f16\t'16-bit floats (half the bytes per hop)'"
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l max-tokens -d 'Most tokens to generate [default: until the end of sequence, a stop, or the context\'s end; a server\'s requests without `max_tokens` too]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l sampling -d 'How the last stage picks tokens' -r -f -a "greedy\t'The most likely token, always'
sample\t'Temperature sampling with optional top-k / top-p, seeded'"
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l temperature -d 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l top-k -d 'Keep only the K most likely tokens (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l top-p -d 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l seed -d 'Seed of the sampler (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l max-sequences -d 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l prompt-cache-bytes -d 'Bytes each stage\'s node may keep of evicted prompt prefixes (its layers\' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from plan" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l stages -d 'Number of stages (one node process each)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l model -d 'The GGUF model [default: a small synthesized model, written to a temporary file]' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l threads -d 'Compute threads of each stage worker (the nodes share this host; `--worker-threads` is an older name)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l arena-bytes -d 'Arena bytes per node' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l http -d 'Where the HTTP API listens [default: 127.0.0.1:8080]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l grace-s -d 'Seconds a stop (SIGINT / SIGTERM) lets requests in flight finish before it cancels them [default: 30]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l api-key-file -d 'A file holding the API key: every route but /health and the page then needs `Authorization: Bearer KEY`' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l max-body-bytes -d 'Request bodies over this many bytes are refused with 413 [default: 8388608]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l max-connections -d 'HTTP connections open at once; a client past them is answered 503 at once [default: 256]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l max-connections-per-peer -d 'HTTP connections open at once from one IP address; a client past them is answered 429 at once (behind a proxy on this host every client is one address) [default: half of `--max-connections`]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l header-timeout-s -d 'Seconds a request\'s headers may take to arrive (and an idle kept-alive connection stays open) [default: 10]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l body-timeout-s -d 'Seconds a request\'s body may take to arrive once its headers have; then 408 and the connection closes [default: 30]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l cors-origin -d 'A page origin (`scheme://host[:port]`) allowed to call the API from a browser, besides the server\'s own page and localhost pages; repeatable; `*` allows any' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l allowed-host -d 'A host name (or `name:port`) requests may name in `Host`, besides IP addresses and `localhost` (this stops DNS rebinding); repeatable; `*` allows any. Without it, a server bound to a wildcard address (`0.0.0.0`, `[::]`) answers any name, one bound to a given address only IP addresses and `localhost`' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l model-name -d 'The model\'s name in /v1/models and in responses [default: the GGUF\'s name, else its file name]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l prompt -d 'The prompt text' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l requests -d 'Run a batch job: JSON Lines requests (`id`, `prompt` or `messages`, `max_tokens`, `temperature`, `top_p`, `top_k`, `seed`, `stop`) served concurrently by one session; one JSON line per request\'s result (or error) on stdout. `-` reads standard input' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l queue -d 'With `--requests` or `--serve`: requests waiting for a slot at most (more are refused as `busy`, 429 when serving) [default: every request of the file; 64 when serving]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l groups -d 'With `--requests` or `--serve`: micro-batches in flight at most (the sequences are spread over this many groups) [default: one per stage, at most `--max-sequences`]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l prefill-budget-ms -d 'With `--requests` or `--serve`: a micro-batch carrying a prompt chunk while other sequences decode should come back within this many milliseconds; the chunk size follows what the session measures (0: chunks follow the row budget alone)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l speculate -d 'Speculative decoding: `ngram` drafts each sequence\'s next tokens from its own prompt and output and verifies them in one trip through the pipeline (the output is the same tokens as without it)' -r -f -a "off\t'No speculation'
ngram\t'N-gram lookup over the sequence\'s own prompt and output'"
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l draft-max -d 'With `--speculate`: the most tokens drafted per trip (the length follows each sequence\'s measured acceptance)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l draft-model -d 'A draft model (same vocabulary as the model) that proposes the drafts, run greedily by this process\'s engine for every speculating sequence at once; implies speculation' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l draft-threads -d 'With `--draft-model`: its compute threads in this process' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l events -d 'Write every event of the run as JSON Lines to this file' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l readiness-timeout -d 'Seconds to wait for every stage to be ready (weights loaded, edges up)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l token-timeout -d 'Seconds to wait for each token' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l resume-timeout -d 'Seconds to wait for enough nodes to re-form after a node is lost; then every request the session held ends with the fault' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l max-resumes -d 'Times one request may be resumed; past that it ends with the fault' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l max-seq-len -d 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model\'s trained context length, lowered to what the nodes\' memory holds; `run plan` says which and why]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l kv-cache -d 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)' -r -f -a "f32\t'32-bit floats'
f16\t'16-bit floats (half the KV cache memory)'"
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l activation-dtype -d 'Element type of activations between stages (f32 is bit-exact with one process)' -r -f -a "f32\t'32-bit floats (bit-exact with one process)'
f16\t'16-bit floats (half the bytes per hop)'"
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l max-tokens -d 'Most tokens to generate [default: until the end of sequence, a stop, or the context\'s end; a server\'s requests without `max_tokens` too]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l sampling -d 'How the last stage picks tokens' -r -f -a "greedy\t'The most likely token, always'
sample\t'Temperature sampling with optional top-k / top-p, seeded'"
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l temperature -d 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l top-k -d 'Keep only the K most likely tokens (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l top-p -d 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l seed -d 'Seed of the sampler (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l prompt-cache-bytes -d 'Bytes each stage\'s node may keep of evicted prompt prefixes (its layers\' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l run-id -d 'The run id (default: a fresh one, from this host\'s clock in microseconds, so no two runs of an orchestrator share one)' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l max-sequences -d 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1, or 8 with `--requests` or `--serve`]' -r
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l node-logs -d 'Pass the nodes\' logs through to stderr'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l serve -d 'Serve the OpenAI-compatible HTTP API over the local pipeline instead of running one prompt or a requests file (see `orchestrate serve`)'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l chat -d 'Wrap the prompt in the model\'s chat template (ChatML, Llama 3 or Llama 2 style)'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l stream -d 'With `--requests`: also a JSON line per generated token'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l no-resume -d 'Fail the session at once when a stage node is lost, as before re-formation existed (default: re-form over the nodes left and resume every request)'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from local" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from help" -f -a "plan" -d 'Plan a run over a pool and predict its resources, without running anything'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from help" -f -a "local" -d 'Run a whole pipeline on this machine: N `swactor node boot` children on loopback, the orchestrator in this process; prints the generated text and cleans up'
complete -c swactor -n "__fish_swactor_using_subcommand run; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l model -d 'The GGUF model' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l prompt -d 'The prompt text' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l prompt-ids -d 'The prompt as token ids, comma-separated (nothing is added: give the bos id yourself), instead of `--prompt`' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l stages -d 'Split the model into this many stages in this process (activations cross each boundary as wire bytes, as in a pipeline)' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l device -d 'Where to compute: `cpu` (swactor\'s engine), `candle` (candle\'s CPU ops, the reference), or `cuda:N` in a build with the `cuda` feature' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l threads -d 'Compute threads (the in-process stages share them) [default: the CPUs available]' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l speculate -d 'Speculative decoding: `ngram` drafts from the prompt and output so far and verifies each draft in one pass (the output is the same tokens as without it)' -r -f -a "off\t'No speculation'
ngram\t'N-gram lookup over the sequence\'s own prompt and output'"
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l draft-model -d 'A draft model (same vocabulary) that proposes the drafts, run greedily in this process; implies speculation' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l draft-max -d 'The most tokens drafted per pass (the length follows the measured acceptance)' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l max-seq-len -d 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model\'s trained context length, lowered to what the nodes\' memory holds; `run plan` says which and why]' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l kv-cache -d 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)' -r -f -a "f32\t'32-bit floats'
f16\t'16-bit floats (half the KV cache memory)'"
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l activation-dtype -d 'Element type of activations between stages (f32 is bit-exact with one process)' -r -f -a "f32\t'32-bit floats (bit-exact with one process)'
f16\t'16-bit floats (half the bytes per hop)'"
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l max-tokens -d 'Most tokens to generate [default: until the end of sequence, a stop, or the context\'s end; a server\'s requests without `max_tokens` too]' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l sampling -d 'How the last stage picks tokens' -r -f -a "greedy\t'The most likely token, always'
sample\t'Temperature sampling with optional top-k / top-p, seeded'"
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l temperature -d 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l top-k -d 'Keep only the K most likely tokens (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l top-p -d 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l seed -d 'Seed of the sampler (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l max-sequences -d 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1]' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l prompt-cache-bytes -d 'Bytes each stage\'s node may keep of evicted prompt prefixes (its layers\' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]' -r
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l chat -d 'Wrap the prompt in the model\'s chat template (ChatML, Llama 3, Gemma or Llama 2 style), as `run local --chat` does'
complete -c swactor -n "__fish_swactor_using_subcommand generate" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand generate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and not __fish_seen_subcommand_from pool serve help" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and not __fish_seen_subcommand_from pool serve help" -f -a "pool" -d 'Wait for the pool to be ready, plan, provision every stage, inject the prompt, stream the generated text, and tear the run down'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and not __fish_seen_subcommand_from pool serve help" -f -a "serve" -d 'Serve the OpenAI-compatible HTTP API over the pool: form a session when the pool is ready, serve while it lasts, form a new one after a fault; SIGINT / SIGTERM drain within --grace-s and exit 0'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and not __fish_seen_subcommand_from pool serve help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l pool -d 'The pool file' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l model -d 'The GGUF model (the orchestrator\'s copy: tokenizer and plan come from it)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l key -d 'The orchestrator\'s key file (nodes were started with its endpoint id)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l stages -d 'Number of stages [default: one per placement node, or per pool node]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l layers -d 'Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l nodes -d 'Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l weights-url -d 'Nodes download the weights from this `http(s)://host[:port]/path` URL (checked against `--model`\'s size and sha256) instead of reading `--model`\'s path on their own disk' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l listen -d 'iroh listen address (must be reachable by the nodes)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l swim -d 'SWIM listen address' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l advertise -d 'The address other hosts reach this one at, when listening on an unspecified address (default: the local address of the route toward the pool\'s nodes / join seeds; never `0.0.0.0`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l window-ms -d 'Convergence window in milliseconds' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l pool-timeout -d 'Seconds to wait for the pool to be ready' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l prompt -d 'The prompt text' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l requests -d 'Run a batch job: JSON Lines requests (`id`, `prompt` or `messages`, `max_tokens`, `temperature`, `top_p`, `top_k`, `seed`, `stop`) served concurrently by one session; one JSON line per request\'s result (or error) on stdout. `-` reads standard input' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l queue -d 'With `--requests` or `--serve`: requests waiting for a slot at most (more are refused as `busy`, 429 when serving) [default: every request of the file; 64 when serving]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l groups -d 'With `--requests` or `--serve`: micro-batches in flight at most (the sequences are spread over this many groups) [default: one per stage, at most `--max-sequences`]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l prefill-budget-ms -d 'With `--requests` or `--serve`: a micro-batch carrying a prompt chunk while other sequences decode should come back within this many milliseconds; the chunk size follows what the session measures (0: chunks follow the row budget alone)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l speculate -d 'Speculative decoding: `ngram` drafts each sequence\'s next tokens from its own prompt and output and verifies them in one trip through the pipeline (the output is the same tokens as without it)' -r -f -a "off\t'No speculation'
ngram\t'N-gram lookup over the sequence\'s own prompt and output'"
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l draft-max -d 'With `--speculate`: the most tokens drafted per trip (the length follows each sequence\'s measured acceptance)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l draft-model -d 'A draft model (same vocabulary as the model) that proposes the drafts, run greedily by this process\'s engine for every speculating sequence at once; implies speculation' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l draft-threads -d 'With `--draft-model`: its compute threads in this process' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l events -d 'Write every event of the run as JSON Lines to this file' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l readiness-timeout -d 'Seconds to wait for every stage to be ready (weights loaded, edges up)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l token-timeout -d 'Seconds to wait for each token' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l resume-timeout -d 'Seconds to wait for enough nodes to re-form after a node is lost; then every request the session held ends with the fault' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l max-resumes -d 'Times one request may be resumed; past that it ends with the fault' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l max-seq-len -d 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model\'s trained context length, lowered to what the nodes\' memory holds; `run plan` says which and why]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l kv-cache -d 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)' -r -f -a "f32\t'32-bit floats'
f16\t'16-bit floats (half the KV cache memory)'"
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l activation-dtype -d 'Element type of activations between stages (f32 is bit-exact with one process)' -r -f -a "f32\t'32-bit floats (bit-exact with one process)'
f16\t'16-bit floats (half the bytes per hop)'"
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l max-tokens -d 'Most tokens to generate [default: until the end of sequence, a stop, or the context\'s end; a server\'s requests without `max_tokens` too]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l sampling -d 'How the last stage picks tokens' -r -f -a "greedy\t'The most likely token, always'
sample\t'Temperature sampling with optional top-k / top-p, seeded'"
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l temperature -d 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l top-k -d 'Keep only the K most likely tokens (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l top-p -d 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l seed -d 'Seed of the sampler (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l prompt-cache-bytes -d 'Bytes each stage\'s node may keep of evicted prompt prefixes (its layers\' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l run-id -d 'The run id (default: a fresh one, from this host\'s clock in microseconds, so no two runs of an orchestrator share one)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l max-sequences -d 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1, or 8 with `--requests`]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l chat -d 'Wrap the prompt in the model\'s chat template (ChatML, Llama 3 or Llama 2 style)'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l stream -d 'With `--requests`: also a JSON line per generated token'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l no-resume -d 'Fail the session at once when a stage node is lost, as before re-formation existed (default: re-form over the nodes left and resume every request)'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from pool" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l pool -d 'The pool file' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l model -d 'The GGUF model (the orchestrator\'s copy: tokenizer, chat template, facts)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l key -d 'The orchestrator\'s key file (created on first use)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l stages -d 'Number of stages [default: one per placement node, or per pool node]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l layers -d 'Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l nodes -d 'Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l weights-url -d 'Nodes fetch their stage\'s weights from this URL instead of their own copy' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l listen -d 'iroh listen address (must be reachable by the nodes)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l swim -d 'SWIM listen address' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l advertise -d 'The address other hosts reach this one at, when listening on an unspecified address (default: the local address of the route toward the pool\'s nodes / join seeds; never `0.0.0.0`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l window-ms -d 'Convergence window in milliseconds' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l pool-timeout -d 'Seconds to wait for the pool to be ready' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l http -d 'Where the HTTP API listens [default: 127.0.0.1:8080]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l grace-s -d 'Seconds a stop (SIGINT / SIGTERM) lets requests in flight finish before it cancels them [default: 30]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l api-key-file -d 'A file holding the API key: every route but /health and the page then needs `Authorization: Bearer KEY`' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l max-body-bytes -d 'Request bodies over this many bytes are refused with 413 [default: 8388608]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l max-connections -d 'HTTP connections open at once; a client past them is answered 503 at once [default: 256]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l max-connections-per-peer -d 'HTTP connections open at once from one IP address; a client past them is answered 429 at once (behind a proxy on this host every client is one address) [default: half of `--max-connections`]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l header-timeout-s -d 'Seconds a request\'s headers may take to arrive (and an idle kept-alive connection stays open) [default: 10]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l body-timeout-s -d 'Seconds a request\'s body may take to arrive once its headers have; then 408 and the connection closes [default: 30]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l cors-origin -d 'A page origin (`scheme://host[:port]`) allowed to call the API from a browser, besides the server\'s own page and localhost pages; repeatable; `*` allows any' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l allowed-host -d 'A host name (or `name:port`) requests may name in `Host`, besides IP addresses and `localhost` (this stops DNS rebinding); repeatable; `*` allows any. Without it, a server bound to a wildcard address (`0.0.0.0`, `[::]`) answers any name, one bound to a given address only IP addresses and `localhost`' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l model-name -d 'The model\'s name in /v1/models and in responses [default: the GGUF\'s name, else its file name]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l speculate -d 'Speculative decoding: `ngram` drafts each sequence\'s next tokens from its own prompt and output and verifies them in one trip through the pipeline (the output is the same tokens as without it)' -r -f -a "off\t'No speculation'
ngram\t'N-gram lookup over the sequence\'s own prompt and output'"
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l draft-max -d 'With `--speculate`: the most tokens drafted per trip (the length follows each sequence\'s measured acceptance)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l draft-model -d 'A draft model (same vocabulary as the model) that proposes the drafts, run greedily by this process\'s engine for every speculating sequence at once; implies speculation' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l draft-threads -d 'With `--draft-model`: its compute threads in this process' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l resume-timeout -d 'Seconds to wait for enough nodes to re-form after a node is lost; then every request the session held ends with the fault' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l max-resumes -d 'Times one request may be resumed; past that it ends with the fault' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l max-seq-len -d 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model\'s trained context length, lowered to what the nodes\' memory holds; `run plan` says which and why]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l kv-cache -d 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)' -r -f -a "f32\t'32-bit floats'
f16\t'16-bit floats (half the KV cache memory)'"
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l activation-dtype -d 'Element type of activations between stages (f32 is bit-exact with one process)' -r -f -a "f32\t'32-bit floats (bit-exact with one process)'
f16\t'16-bit floats (half the bytes per hop)'"
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l max-tokens -d 'Most tokens to generate [default: until the end of sequence, a stop, or the context\'s end; a server\'s requests without `max_tokens` too]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l sampling -d 'How the last stage picks tokens' -r -f -a "greedy\t'The most likely token, always'
sample\t'Temperature sampling with optional top-k / top-p, seeded'"
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l temperature -d 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l top-k -d 'Keep only the K most likely tokens (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l top-p -d 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l seed -d 'Seed of the sampler (with `--sampling sample`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l prompt-cache-bytes -d 'Bytes each stage\'s node may keep of evicted prompt prefixes (its layers\' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l max-sequences -d 'Sequences served at once, the session\'s slots (1 to 256): every stage holds a KV cache per slot [default: 8]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l queue -d 'Requests waiting for a slot at most; more are refused with 429 [default: 64]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l groups -d 'Micro-batches in flight at most [default: one per stage, at most `--max-sequences`]' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l prefill-budget-ms -d 'A micro-batch carrying a prompt chunk while other sequences decode should come back within this many milliseconds; the chunk size follows what the session measures (0: chunks follow the row budget alone)' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l events -d 'Write every session\'s events as JSON Lines to this file (never overwritten)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l readiness-timeout -d 'Seconds each session may take from provisioning to serving' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l token-timeout -d 'Seconds a micro-batch in flight may take to come back before the session faults' -r
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l no-resume -d 'Fail the session at once when a stage node is lost, as before re-formation existed (default: re-form over the nodes left and resume every request)'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from help" -f -a "pool" -d 'Wait for the pool to be ready, plan, provision every stage, inject the prompt, stream the generated text, and tear the run down'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from help" -f -a "serve" -d 'Serve the OpenAI-compatible HTTP API over the pool: form a session when the pool is ready, serve while it lasts, form a new one after a fault; SIGINT / SIGTERM drain within --grace-s and exit 0'
complete -c swactor -n "__fish_swactor_using_subcommand orchestrate; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand model; and not __fish_seen_subcommand_from inspect synth quantize tokenize help" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand model; and not __fish_seen_subcommand_from inspect synth quantize tokenize help" -f -a "inspect" -d 'Print the facts of a GGUF model: shape, tokenizer, rope, tensor bytes'
complete -c swactor -n "__fish_swactor_using_subcommand model; and not __fish_seen_subcommand_from inspect synth quantize tokenize help" -f -a "synth" -d 'Write a deterministic tiny model of any supported family (`--arch`) with random weights and a real BPE vocabulary'
complete -c swactor -n "__fish_swactor_using_subcommand model; and not __fish_seen_subcommand_from inspect synth quantize tokenize help" -f -a "quantize" -d 'Re-quantize a model\'s weight matrices (norms stay f32)'
complete -c swactor -n "__fish_swactor_using_subcommand model; and not __fish_seen_subcommand_from inspect synth quantize tokenize help" -f -a "tokenize" -d 'Print the token ids of a text as the model\'s tokenizer splits it (`--json`: the ids and each token\'s text)'
complete -c swactor -n "__fish_swactor_using_subcommand model; and not __fish_seen_subcommand_from inspect synth quantize tokenize help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from inspect" -l stages -d 'Show the layers and weight bytes of each of N stages (the planner\'s balance over nodes of equal memory) [default: 2, or 1 for a one-block model]' -r
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from inspect" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from inspect" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l out -d 'Where to write the GGUF file' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l blocks -d 'Transformer blocks' -r
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l hidden -d 'Hidden size' -r
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l heads -d 'Attention heads' -r
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l kv-heads -d 'Key/value heads (grouped-query attention)' -r
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l ffn -d 'Feed-forward inner size' -r
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l vocab -d 'Vocabulary size (at least 257: 256 bytes and an end-of-text token)' -r
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l context -d 'Context length recorded in the file' -r
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l dtype -d 'Storage type of the weight matrices' -r -f -a "f32\t'32-bit floats'
f16\t'16-bit floats'
q8_0\t'8-bit blocks of 32'
q4_0\t'4-bit blocks of 32'"
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l arch -d 'The family written: llama (Llama 2 style), llama3, qwen2, qwen3 or gemma3' -r -f -a "llama\t'Llama 2 style `llama`'
llama3\t'Llama 3.x style `llama` (rope base 500 000, rope frequency factors, tied)'
qwen2\t'Qwen 2.5 (`qwen2`: Q / K / V biases)'
qwen3\t'Qwen 3 (`qwen3`: Q / K norms, wide heads)'
gemma3\t'Gemma 3 (`gemma3`: post norms, Q / K norms, GeGLU, sliding window)'"
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l seed -d 'Seed of the random weights' -r
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l vocab-from -d 'Take the tokenizer of this GGUF model (its tokens, merges, special ids, chat template) instead of synthesizing one: the model shares its vocabulary (a tiny draft model for it). The vocabulary size is its token count' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l tied-embeddings -d 'Reuse the token embedding as the output head (no `output.weight`)'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from synth" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from quantize" -l in -d 'The GGUF model to read' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from quantize" -l out -d 'Where to write the re-quantized model' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from quantize" -l dtype -d 'Target type: f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, or a K-quant mix as llama.cpp makes it: q4_k_m, q5_k_m (Q6_K where more bits pay)' -r
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from quantize" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from quantize" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from tokenize" -l model -d 'The GGUF model whose tokenizer is used' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from tokenize" -l text -d 'The text (repeat the flag for several texts: one line of ids each)' -r
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from tokenize" -l add-special -d 'Add the model\'s bos token where its tokenizer does'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from tokenize" -l parse-special -d 'Match control tokens written in the text (`<|im_start|>`, `<start_of_turn>`, ...)'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from tokenize" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from tokenize" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from help" -f -a "inspect" -d 'Print the facts of a GGUF model: shape, tokenizer, rope, tensor bytes'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from help" -f -a "synth" -d 'Write a deterministic tiny model of any supported family (`--arch`) with random weights and a real BPE vocabulary'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from help" -f -a "quantize" -d 'Re-quantize a model\'s weight matrices (norms stay f32)'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from help" -f -a "tokenize" -d 'Print the token ids of a text as the model\'s tokenizer splits it (`--json`: the ids and each token\'s text)'
complete -c swactor -n "__fish_swactor_using_subcommand model; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand node; and not __fish_seen_subcommand_from id boot help" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand node; and not __fish_seen_subcommand_from id boot help" -f -a "id" -d 'Print this node\'s identity (endpoint id) from its key file, creating the key (0600) on first use. The endpoint id is what pool files name'
complete -c swactor -n "__fish_swactor_using_subcommand node; and not __fish_seen_subcommand_from id boot help" -f -a "boot" -d 'Boot this host as a pool node (identity, arena, worker, iroh endpoint, SWIM, control inbox, admin socket) and serve until SIGINT or SIGTERM'
complete -c swactor -n "__fish_swactor_using_subcommand node; and not __fish_seen_subcommand_from id boot help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from id" -l key -d 'The node\'s key file' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from id" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from id" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l node-id -d 'This node\'s id, as the pool file names it' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l key -d 'The node\'s key file (created 0600 on first boot)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l listen -d 'iroh (QUIC) listen address' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l swim -d 'SWIM (UDP) listen address' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l advertise -d 'The address other hosts reach this one at, when listening on an unspecified address (default: the local address of the route toward the pool\'s nodes / join seeds; never `0.0.0.0`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l join -d 'SWIM addresses of other members to join through (repeatable)' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l orchestrator -d 'The orchestrator\'s endpoint id: the only peer allowed to control this node' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l arena-bytes -d 'Arena size in bytes' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l memory-bytes -d 'Memory this node can give a stage (weights, KV cache, rings), reported in `node_available` [default: the host\'s available memory]' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l prompt-cache-bytes -d 'The most bytes this node\'s stage may keep of evicted prompt prefixes (its layers\' KV, in host memory; 0 disables), reported in `node_available`; with the orchestrator\'s `--prompt-cache-bytes` too, the smaller holds [default: the orchestrator\'s budget]' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l device -d 'Where the stage computes: `cpu`, or `cuda:N` (an NVIDIA GPU; needs a build with the `cuda` feature). Checked at boot: a build without CUDA or a missing device faults the boot (`device_unavailable`, exit 6). Reported in `node_available`' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l threads -d 'Compute threads of the worker\'s stage (`--worker-threads` is an older name; one node per host, its one worker using the host\'s cores) [default: every CPU this process may use]' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l admin -d 'Admin socket for `swactor edge inspect` [default: swactor-node-ID-KEY.sock in the runtime or temporary directory, KEY being the first 16 digits of the endpoint id]. An existing file there is never touched: only a stale socket is replaced' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l cache -d 'Directory for downloaded weights (default: $XDG_CACHE_HOME/swactor/weights)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l boot-timeout-ms -d 'Milliseconds the boot may take; past it the node faults with the resource it was waiting for (exit 6)' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l max-worker-restarts -d 'Restarts of a crashed worker before the node faults and stops [default: any number]' -r
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l stop-on-stdin-eof -d 'Stop when standard input closes (for supervisors such as `run local`)'
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from boot" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "id" -d 'Print this node\'s identity (endpoint id) from its key file, creating the key (0600) on first use. The endpoint id is what pool files name'
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "boot" -d 'Boot this host as a pool node (identity, arena, worker, iroh endpoint, SWIM, control inbox, admin socket) and serve until SIGINT or SIGTERM'
complete -c swactor -n "__fish_swactor_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand edge; and not __fish_seen_subcommand_from inspect help" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand edge; and not __fish_seen_subcommand_from inspect help" -f -a "inspect" -d 'Show a node\'s edge records (state, ring, peers) and what it sees of the pool'
complete -c swactor -n "__fish_swactor_using_subcommand edge; and not __fish_seen_subcommand_from inspect help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand edge; and __fish_seen_subcommand_from inspect" -l node -d 'The node\'s admin socket' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand edge; and __fish_seen_subcommand_from inspect" -l edge -d 'Show only this edge' -r
complete -c swactor -n "__fish_swactor_using_subcommand edge; and __fish_seen_subcommand_from inspect" -l timeout-ms -d 'Milliseconds to wait for the node\'s answer' -r
complete -c swactor -n "__fish_swactor_using_subcommand edge; and __fish_seen_subcommand_from inspect" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand edge; and __fish_seen_subcommand_from inspect" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand edge; and __fish_seen_subcommand_from help" -f -a "inspect" -d 'Show a node\'s edge records (state, ring, peers) and what it sees of the pool'
complete -c swactor -n "__fish_swactor_using_subcommand edge; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand cache; and not __fish_seen_subcommand_from ls clear help" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand cache; and not __fish_seen_subcommand_from ls clear help" -f -a "ls" -d 'List the downloaded weights: file, kind (whole or a stage\'s ranges), size, URL, sha256'
complete -c swactor -n "__fish_swactor_using_subcommand cache; and not __fish_seen_subcommand_from ls clear help" -f -a "clear" -d 'Remove the downloaded weights (only the cache\'s own files in the directory)'
complete -c swactor -n "__fish_swactor_using_subcommand cache; and not __fish_seen_subcommand_from ls clear help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand cache; and __fish_seen_subcommand_from ls" -l cache -d 'The weights cache directory, as given to `node boot --cache` (default: $XDG_CACHE_HOME/swactor/weights)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand cache; and __fish_seen_subcommand_from ls" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand cache; and __fish_seen_subcommand_from ls" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand cache; and __fish_seen_subcommand_from clear" -l cache -d 'The weights cache directory, as given to `node boot --cache` (default: $XDG_CACHE_HOME/swactor/weights)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand cache; and __fish_seen_subcommand_from clear" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand cache; and __fish_seen_subcommand_from clear" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand cache; and __fish_seen_subcommand_from help" -f -a "ls" -d 'List the downloaded weights: file, kind (whole or a stage\'s ranges), size, URL, sha256'
complete -c swactor -n "__fish_swactor_using_subcommand cache; and __fish_seen_subcommand_from help" -f -a "clear" -d 'Remove the downloaded weights (only the cache\'s own files in the directory)'
complete -c swactor -n "__fish_swactor_using_subcommand cache; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand pool; and not __fish_seen_subcommand_from watch init help" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand pool; and not __fish_seen_subcommand_from watch init help" -f -a "watch" -d 'Observe a pool read-only: connect to every node of a pool file with the orchestrator\'s delegation (never as the orchestrator), and report availability, liveness as the nodes\' SWIM sees it, and pool readiness (ready = every node available, live and unchanged for the convergence window). Safe beside a run'
complete -c swactor -n "__fish_swactor_using_subcommand pool; and not __fish_seen_subcommand_from watch init help" -f -a "init" -d 'Write a pool file from what the nodes printed: the `node_available` lines of `node boot --json` (from files, or standard input), so nobody copies endpoint ids by hand. Each node\'s reported memory becomes its `memory_bytes` (left out when it reported none: `orchestrate pool` then takes the node\'s report); the pool is checked as `run plan` checks a pool file'
complete -c swactor -n "__fish_swactor_using_subcommand pool; and not __fish_seen_subcommand_from watch init help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from watch" -l pool -d 'The pool file' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from watch" -l key -d 'The orchestrator\'s key file (nodes were started with its endpoint id). It only vouches for the watch, which holds a key of its own and observes read-only: it may run beside `orchestrate pool` with the same file' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from watch" -l listen -d 'iroh listen address (the watch only connects out; it joins no membership)' -r
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from watch" -l window-ms -d 'Convergence window in milliseconds' -r
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from watch" -l pool-timeout -d 'Give up (exit 8) when the pool is not ready within S seconds [default: wait on]' -r
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from watch" -l until-ready -d 'Exit once the pool is ready'
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from watch" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from watch" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from init" -l orchestrator-node-id -d 'The orchestrator\'s node id in the pool' -r
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from init" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "watch" -d 'Observe a pool read-only: connect to every node of a pool file with the orchestrator\'s delegation (never as the orchestrator), and report availability, liveness as the nodes\' SWIM sees it, and pool readiness (ready = every node available, live and unchanged for the convergence window). Safe beside a run'
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "init" -d 'Write a pool file from what the nodes printed: the `node_available` lines of `node boot --json` (from files, or standard input), so nobody copies endpoint ids by hand. Each node\'s reported memory becomes its `memory_bytes` (left out when it reported none: `orchestrate pool` then takes the node\'s report); the pool is checked as `run plan` checks a pool file'
complete -c swactor -n "__fish_swactor_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand chat" -l system -d 'A system message that opens the conversation' -r
complete -c swactor -n "__fish_swactor_using_subcommand chat" -l server -d 'The server\'s URL' -r
complete -c swactor -n "__fish_swactor_using_subcommand chat" -l api-key-file -d 'A file holding the API key [default: $SWACTOR_API_KEY, if set]' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand chat" -l max-tokens -d 'Tokens to generate at most [default: the server\'s]' -r
complete -c swactor -n "__fish_swactor_using_subcommand chat" -l temperature -d 'Sampling temperature (0 is greedy) [default: the server\'s]' -r
complete -c swactor -n "__fish_swactor_using_subcommand chat" -l seed -d 'The sampler\'s seed' -r
complete -c swactor -n "__fish_swactor_using_subcommand chat" -l stop -d 'A string that ends the answer (repeatable)' -r
complete -c swactor -n "__fish_swactor_using_subcommand chat" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand chat" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand complete" -l prompt -d 'The prompt (`-` reads it from standard input)' -r
complete -c swactor -n "__fish_swactor_using_subcommand complete" -l server -d 'The server\'s URL' -r
complete -c swactor -n "__fish_swactor_using_subcommand complete" -l api-key-file -d 'A file holding the API key [default: $SWACTOR_API_KEY, if set]' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand complete" -l max-tokens -d 'Tokens to generate at most [default: the server\'s]' -r
complete -c swactor -n "__fish_swactor_using_subcommand complete" -l temperature -d 'Sampling temperature (0 is greedy) [default: the server\'s]' -r
complete -c swactor -n "__fish_swactor_using_subcommand complete" -l seed -d 'The sampler\'s seed' -r
complete -c swactor -n "__fish_swactor_using_subcommand complete" -l stop -d 'A string that ends the answer (repeatable)' -r
complete -c swactor -n "__fish_swactor_using_subcommand complete" -l stream -d 'Print the text as it is generated'
complete -c swactor -n "__fish_swactor_using_subcommand complete" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand complete" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "ring" -d 'Cross-process ring throughput (node producer -> ingress ring -> a real worker\'s device copy) as a ratio of plain memcpy bandwidth measured in the same run'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "wake" -d 'Wake round trip: a small object written into an ingress ring until the worker\'s `ObjectLoaded` line is read back (median and p99)'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "edge" -d 'Edge throughput (egress ring -> send pump -> QUIC -> receive pump -> ingress ring) beside raw iroh stream throughput, and the hop latency of a decode-sized object'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "decode" -d 'Decode tokens/s of `swactor generate` at one compute thread: the whole model against the same model split into in-process stages, for the model and re-quantized copies of it'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "pipeline" -d 'Decode tokens/s of a `run local` pipeline (one node process per stage, one compute thread each) against `swactor generate` at one thread, and the time from `run local`\'s start to its first token'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "engine" -d 'The CPU engine on one or more models (and re-quantized copies): decode and prefill tokens/s at each thread count, aggregate decode at several batch sizes, and stage load time (mapped, against candle\'s copying load). `scripts/bench-llama-cpp.py` runs it beside llama.cpp'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "products" -d 'The engine\'s matrix products one at a time on a model\'s own weights: time per product against the bytes it reads and this machine\'s memory read bandwidth (measured in the same run), beside the whole forward pass, for a decode step and prefills'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "speculate" -d 'Speculative decoding: one sequence\'s decode tokens/s with and without n-gram drafts, in one process and through a `run local` pipeline, on a grounded workload (text the answer repeats or edits) and on free generation, each pair side by side'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "failover" -d 'Fault detection: SIGKILLs a stage node of a local pipeline mid-decode and measures the time to `run_faulted` and to `run_torn_down`'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "serve" -d 'Serving: a `run local` session with 1, 2, 4, 8 and 16 concurrent greedy requests (aggregate decode tokens/s, time to first token and inter-token latency p50 / p95) beside one-sequence `swactor generate` with the same total compute threads'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "prefix" -d 'The prefix cache: a multi-turn conversation served by `run local --serve` (each turn a completion of the transcript so far), each turn sent with the cache and again with `cache_prompt: false` (time to first token, cached tokens per turn), then conversations sharing a long system prompt at once, with and without it (aggregate tokens/s)'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and not __fish_seen_subcommand_from ring wake edge decode pipeline engine products speculate failover serve prefix help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from ring" -l ring-mib -d 'Ring data capacity in MiB (the planner\'s largest activation ring)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from ring" -l span-kib -d 'Bytes the producer writes at a time, in KiB' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from ring" -l object-mib -d 'Object size in MiB' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from ring" -l total-mib -d 'Bytes to stream in MiB' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from ring" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from ring" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from wake" -l samples -d 'Round trips to measure' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from wake" -l bytes -d 'Object payload bytes (a multiple of 4)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from wake" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from wake" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from edge" -l mib -d 'MiB to stream in each throughput run' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from edge" -l object-bytes -d 'Object size of the latency run (a decode-sized activation by default)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from edge" -l samples -d 'Latency samples' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from edge" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from edge" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from decode" -l model -d 'The GGUF model; again for more models, measured one after another in the same run (`--requantize` copies the first)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from decode" -l stages -d 'Stages of the split run' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from decode" -l tokens -d 'Tokens to generate per run' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from decode" -l requantize -d 'Also measure copies re-quantized to these types (e.g. `q8_0,q4_0`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from decode" -l repeat -d 'Runs of each configuration (the best is kept)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from decode" -l synth-1b -d 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`: 22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000, Q4_0): figures at a real size beside the model\'s'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from decode" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from decode" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from pipeline" -l model -d 'The GGUF model; again for more models, measured one after another in the same run (`--requantize` copies the first)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from pipeline" -l stages -d 'Stages of the split run' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from pipeline" -l tokens -d 'Tokens to generate per run' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from pipeline" -l requantize -d 'Also measure copies re-quantized to these types (e.g. `q8_0,q4_0`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from pipeline" -l repeat -d 'Runs of each configuration (the best is kept)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from pipeline" -l synth-1b -d 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`: 22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000, Q4_0): figures at a real size beside the model\'s'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from pipeline" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from pipeline" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from engine" -l model -d 'A GGUF model (repeatable)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from engine" -l requantize -d 'Also measure copies of the first model re-quantized to these types (e.g. `q8_0,q4_0,q4_k`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from engine" -l threads -d 'Compute thread counts to measure' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from engine" -l tokens -d 'Tokens decoded per run' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from engine" -l prompt-tokens -d 'Lengths of the prefill prompts (one prefill measured at each)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from engine" -l batch -d 'Batch sizes of the aggregate decode' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from engine" -l repeat -d 'Runs of each measurement (the best is kept)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from engine" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from engine" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from products" -l model -d 'The GGUF model' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from products" -l threads -d 'Compute thread counts to measure' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from products" -l rows -d 'Activation rows of each forward pass measured (1: a decode step; more: a prefill)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from products" -l repeat -d 'Runs of each measurement (the best is kept)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from products" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from products" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from speculate" -l model -d 'The GGUF model' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from speculate" -l grounded -d 'The grounded workload: JSON Lines of `{"prompt", "max_tokens"}`' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from speculate" -l stages -d 'Stages of the pipeline layout' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from speculate" -l tokens -d 'Tokens per free-generation prompt' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from speculate" -l free -d 'Free-generation prompts (story openings)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from speculate" -l draft-model -d 'Draft with this model (same vocabulary) instead of n-gram lookup' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from speculate" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from speculate" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from failover" -l stages -d 'Stages of the local pipeline (node 2 is killed)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from failover" -l model -d 'With `--resume`: the GGUF model served' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from failover" -l sequences -d 'With `--resume`: requests in flight, each a series' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from failover" -l repeat -d 'Runs (each on a fresh local pool)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from failover" -l resume -d 'Resume instead of failing: the session re-forms over a spare node and, in a second series, over the survivors alone; the time from the kill to the first resumed token and its parts'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from failover" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from failover" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l model -d 'The GGUF model; again for more models, measured one after another in the same run (`--requantize` copies the first)' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l stages -d 'Stages of the session (one node process each)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l threads -d 'Compute threads of each stage worker (the baselines get every core of the host)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l tokens -d 'Tokens each request generates' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l concurrency -d 'Concurrency levels' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l requantize -d 'Also measure copies re-quantized to these types (e.g. `q8_0`)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l groups -d 'Micro-batches in flight at most (`run local --groups`) [default: the session\'s]' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l prefill-budget-ms -d 'The session\'s prefill time budget (`run local --prefill-budget-ms`) [default: the session\'s]' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l repeat -d 'Runs per level (each a batch job and, with --http, the same through HTTP, one after the other); the medians are printed' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l synth-1b -d 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`: 22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000, Q4_0): figures at a real size beside the model\'s'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l http -d 'Also serve each level through the HTTP API (`run local --serve`, N concurrent streamed completions measured by the client) beside the batch job\'s figures'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from serve" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l model -d 'The GGUF model; again for more models, measured one after another in the same run' -r -F
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l stages -d 'Stages of the session (one node process each)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l threads -d 'Compute threads of each stage worker' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l turns -d 'Turns of the conversation' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l turn-words -d 'Words of user text each turn adds (about a token each)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l reply-tokens -d 'Tokens each reply generates at most' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l conversations -d 'Conversations at once sharing one system prompt (0: that part is skipped)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l system-words -d 'Words of the shared system prompt' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l shared-turns -d 'Turns of each of those conversations (and of the crowded part\'s)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l crowd -d 'Conversations taking turns one after another, twice as many as the slots by default, so that each finds its history in the stages\' block stores, not in its slot (0: that part is skipped)' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l max-seq-len -d 'Each sequence\'s context [default: the server\'s: the model\'s trained length as far as memory holds it]' -r
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l synth-1b -d 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`), at a real size beside the model\'s'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -l json -d 'Print JSON Lines (one object per line with a `type` tag) instead of text'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from prefix" -s h -l help -d 'Print help'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "ring" -d 'Cross-process ring throughput (node producer -> ingress ring -> a real worker\'s device copy) as a ratio of plain memcpy bandwidth measured in the same run'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "wake" -d 'Wake round trip: a small object written into an ingress ring until the worker\'s `ObjectLoaded` line is read back (median and p99)'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "edge" -d 'Edge throughput (egress ring -> send pump -> QUIC -> receive pump -> ingress ring) beside raw iroh stream throughput, and the hop latency of a decode-sized object'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "decode" -d 'Decode tokens/s of `swactor generate` at one compute thread: the whole model against the same model split into in-process stages, for the model and re-quantized copies of it'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "pipeline" -d 'Decode tokens/s of a `run local` pipeline (one node process per stage, one compute thread each) against `swactor generate` at one thread, and the time from `run local`\'s start to its first token'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "engine" -d 'The CPU engine on one or more models (and re-quantized copies): decode and prefill tokens/s at each thread count, aggregate decode at several batch sizes, and stage load time (mapped, against candle\'s copying load). `scripts/bench-llama-cpp.py` runs it beside llama.cpp'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "products" -d 'The engine\'s matrix products one at a time on a model\'s own weights: time per product against the bytes it reads and this machine\'s memory read bandwidth (measured in the same run), beside the whole forward pass, for a decode step and prefills'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "speculate" -d 'Speculative decoding: one sequence\'s decode tokens/s with and without n-gram drafts, in one process and through a `run local` pipeline, on a grounded workload (text the answer repeats or edits) and on free generation, each pair side by side'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "failover" -d 'Fault detection: SIGKILLs a stage node of a local pipeline mid-decode and measures the time to `run_faulted` and to `run_torn_down`'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "serve" -d 'Serving: a `run local` session with 1, 2, 4, 8 and 16 concurrent greedy requests (aggregate decode tokens/s, time to first token and inter-token latency p50 / p95) beside one-sequence `swactor generate` with the same total compute threads'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "prefix" -d 'The prefix cache: a multi-turn conversation served by `run local --serve` (each turn a completion of the transcript so far), each turn sent with the cache and again with `cache_prompt: false` (time to first token, cached tokens per turn), then conversations sharing a long system prompt at once, with and without it (aggregate tokens/s)'
complete -c swactor -n "__fish_swactor_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "run" -d 'Run a whole pipeline on this machine (`run local`), or plan one over a pool (`run plan`)'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "generate" -d 'Generate text with a whole model in this one process (the pipeline\'s reference)'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "orchestrate" -d 'Run a prompt through a pool of `swactor node boot` hosts'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "model" -d 'Inspect and synthesize GGUF models'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "node" -d 'Run this host as a pool node, or print its identity'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "edge" -d 'Inspect the live edges of a node'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "cache" -d 'List or clear a node\'s downloaded weights'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "pool" -d 'Watch a pool from the orchestrator\'s side'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "chat" -d 'Chat with a swactor server: an interactive loop on a terminal (the conversation is kept), one exchange from standard input otherwise'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "complete" -d 'Ask a swactor server to complete a prompt; the text on stdout (streamed with --stream), the whole response with --json'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "bench" -d 'Measure the data plane on this machine (each figure beside its baseline)'
complete -c swactor -n "__fish_swactor_using_subcommand help; and not __fish_seen_subcommand_from run generate orchestrate model node edge cache pool chat complete bench help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from run" -f -a "plan" -d 'Plan a run over a pool and predict its resources, without running anything'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from run" -f -a "local" -d 'Run a whole pipeline on this machine: N `swactor node boot` children on loopback, the orchestrator in this process; prints the generated text and cleans up'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from orchestrate" -f -a "pool" -d 'Wait for the pool to be ready, plan, provision every stage, inject the prompt, stream the generated text, and tear the run down'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from orchestrate" -f -a "serve" -d 'Serve the OpenAI-compatible HTTP API over the pool: form a session when the pool is ready, serve while it lasts, form a new one after a fault; SIGINT / SIGTERM drain within --grace-s and exit 0'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from model" -f -a "inspect" -d 'Print the facts of a GGUF model: shape, tokenizer, rope, tensor bytes'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from model" -f -a "synth" -d 'Write a deterministic tiny model of any supported family (`--arch`) with random weights and a real BPE vocabulary'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from model" -f -a "quantize" -d 'Re-quantize a model\'s weight matrices (norms stay f32)'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from model" -f -a "tokenize" -d 'Print the token ids of a text as the model\'s tokenizer splits it (`--json`: the ids and each token\'s text)'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "id" -d 'Print this node\'s identity (endpoint id) from its key file, creating the key (0600) on first use. The endpoint id is what pool files name'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "boot" -d 'Boot this host as a pool node (identity, arena, worker, iroh endpoint, SWIM, control inbox, admin socket) and serve until SIGINT or SIGTERM'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from edge" -f -a "inspect" -d 'Show a node\'s edge records (state, ring, peers) and what it sees of the pool'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from cache" -f -a "ls" -d 'List the downloaded weights: file, kind (whole or a stage\'s ranges), size, URL, sha256'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from cache" -f -a "clear" -d 'Remove the downloaded weights (only the cache\'s own files in the directory)'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "watch" -d 'Observe a pool read-only: connect to every node of a pool file with the orchestrator\'s delegation (never as the orchestrator), and report availability, liveness as the nodes\' SWIM sees it, and pool readiness (ready = every node available, live and unchanged for the convergence window). Safe beside a run'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "init" -d 'Write a pool file from what the nodes printed: the `node_available` lines of `node boot --json` (from files, or standard input), so nobody copies endpoint ids by hand. Each node\'s reported memory becomes its `memory_bytes` (left out when it reported none: `orchestrate pool` then takes the node\'s report); the pool is checked as `run plan` checks a pool file'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "ring" -d 'Cross-process ring throughput (node producer -> ingress ring -> a real worker\'s device copy) as a ratio of plain memcpy bandwidth measured in the same run'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "wake" -d 'Wake round trip: a small object written into an ingress ring until the worker\'s `ObjectLoaded` line is read back (median and p99)'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "edge" -d 'Edge throughput (egress ring -> send pump -> QUIC -> receive pump -> ingress ring) beside raw iroh stream throughput, and the hop latency of a decode-sized object'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "decode" -d 'Decode tokens/s of `swactor generate` at one compute thread: the whole model against the same model split into in-process stages, for the model and re-quantized copies of it'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "pipeline" -d 'Decode tokens/s of a `run local` pipeline (one node process per stage, one compute thread each) against `swactor generate` at one thread, and the time from `run local`\'s start to its first token'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "engine" -d 'The CPU engine on one or more models (and re-quantized copies): decode and prefill tokens/s at each thread count, aggregate decode at several batch sizes, and stage load time (mapped, against candle\'s copying load). `scripts/bench-llama-cpp.py` runs it beside llama.cpp'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "products" -d 'The engine\'s matrix products one at a time on a model\'s own weights: time per product against the bytes it reads and this machine\'s memory read bandwidth (measured in the same run), beside the whole forward pass, for a decode step and prefills'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "speculate" -d 'Speculative decoding: one sequence\'s decode tokens/s with and without n-gram drafts, in one process and through a `run local` pipeline, on a grounded workload (text the answer repeats or edits) and on free generation, each pair side by side'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "failover" -d 'Fault detection: SIGKILLs a stage node of a local pipeline mid-decode and measures the time to `run_faulted` and to `run_torn_down`'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "serve" -d 'Serving: a `run local` session with 1, 2, 4, 8 and 16 concurrent greedy requests (aggregate decode tokens/s, time to first token and inter-token latency p50 / p95) beside one-sequence `swactor generate` with the same total compute threads'
complete -c swactor -n "__fish_swactor_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "prefix" -d 'The prefix cache: a multi-turn conversation served by `run local --serve` (each turn a completion of the transcript so far), each turn sent with the cache and again with `cache_prompt: false` (time to first token, cached tokens per turn), then conversations sharing a long system prompt at once, with and without it (aggregate tokens/s)'
