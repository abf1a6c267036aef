
use builtin;
use str;

set edit:completion:arg-completer[swactor] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'swactor'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'swactor'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand run 'Run a whole pipeline on this machine (`run local`), or plan one over a pool (`run plan`)'
            cand generate 'Generate text with a whole model in this one process (the pipeline''s reference)'
            cand orchestrate 'Run a prompt through a pool of `swactor node boot` hosts'
            cand model 'Inspect and synthesize GGUF models'
            cand node 'Run this host as a pool node, or print its identity'
            cand edge 'Inspect the live edges of a node'
            cand cache 'List or clear a node''s downloaded weights'
            cand pool 'Watch a pool from the orchestrator''s side'
            cand relay 'Host an iroh relay for pool members behind NAT'
            cand chat 'Chat with a swactor server: an interactive loop on a terminal (the conversation is kept), one exchange from standard input otherwise'
            cand complete 'Ask a swactor server to complete a prompt; the text on stdout (streamed with --stream), the whole response with --json'
            cand bench 'Measure the data plane on this machine (each figure beside its baseline)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;run'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand plan 'Plan a run over a pool and predict its resources, without running anything'
            cand local 'Run a whole pipeline on this machine: N `swactor node boot` children on loopback, the orchestrator in this process; prints the generated text and cleans up'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;run;plan'= {
            cand --model 'The GGUF model to plan for'
            cand --pool 'The pool file (TOML inventory of nodes)'
            cand --stages 'Number of stages [default: one per placement node, or per pool node]'
            cand --layers 'Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`'
            cand --nodes 'Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order]'
            cand --balance 'What automatic layer ranges balance: the stages'' decode steps from the speed each node measured at boot (within its memory), or their bytes against node memory'
            cand --min-speedup 'Refuse a plan predicted to decode one sequence slower than X times the best single node that holds the model (`below_min_speedup`, exit 4)'
            cand --prompt-tokens 'Prompt length assumed for the prefill predictions'
            cand --weights-url 'Nodes download the weights from this `http(s)://host[:port]/path` URL instead of reading `--model`''s path; the plan carries the size and sha256 of the local `--model` file to check them against'
            cand --run-id 'The run id to write into the plan'
            cand --max-seq-len 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model''s trained context length, lowered to what the nodes'' memory holds; `run plan` says which and why]'
            cand --kv-cache 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)'
            cand --activation-dtype 'Element type of activations between stages (f32 is bit-exact with one process)'
            cand --max-tokens 'Most tokens to generate [default: until the end of sequence, a stop, or the context''s end; a server''s requests without `max_tokens` too]'
            cand --sampling 'How the last stage picks tokens'
            cand --temperature 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy'
            cand --top-k 'Keep only the K most likely tokens (with `--sampling sample`)'
            cand --top-p 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)'
            cand --seed 'Seed of the sampler (with `--sampling sample`)'
            cand --max-sequences 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1]'
            cand --prompt-cache-bytes 'Bytes each stage''s node may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]'
            cand --auto-stages 'Choose the stage count and nodes: of every count, the fastest nodes (by the speed each measured at boot) that hold the model, the plan predicted to decode fastest; fewer stages win ties (so slow links get fewer hops)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'swactor;run;local'= {
            cand --stages 'Number of stages (one node process each)'
            cand --model 'The GGUF model [default: a small synthesized model, written to a temporary file]'
            cand --layout 'How the stages share this host''s cores: `one-host` (one micro-batch in flight, every core for the stage computing it) or `multi-host` (one micro-batch per stage, one thread per worker: the shape of a pool of hosts)'
            cand --threads 'Compute threads of each stage worker (the nodes share this host; `--worker-threads` is an older name) [default: every core with `--layout one-host`, 1 with `multi-host`]'
            cand --arena-bytes 'Arena bytes per node'
            cand --http 'Where the HTTP API listens [default: 127.0.0.1:8080]'
            cand --grace-s 'Seconds a stop (SIGINT / SIGTERM) lets requests in flight finish before it cancels them [default: 30]'
            cand --api-key-file 'A file holding the API key: every route but /health and the page then needs `Authorization: Bearer KEY`'
            cand --max-body-bytes 'Request bodies over this many bytes are refused with 413 [default: 8388608]'
            cand --max-connections 'HTTP connections open at once; a client past them is answered 503 at once [default: 256]'
            cand --max-connections-per-peer 'HTTP connections open at once from one IP address; a client past them is answered 429 at once (behind a proxy on this host every client is one address) [default: half of `--max-connections`]'
            cand --header-timeout-s 'Seconds a request''s headers may take to arrive (and an idle kept-alive connection stays open) [default: 10]'
            cand --body-timeout-s 'Seconds a request''s body may take to arrive once its headers have; then 408 and the connection closes [default: 30]'
            cand --cors-origin 'A page origin (`scheme://host[:port]`) allowed to call the API from a browser, besides the server''s own page and localhost pages; repeatable; `*` allows any'
            cand --allowed-host 'A host name (or `name:port`) requests may name in `Host`, besides IP addresses and `localhost` (this stops DNS rebinding); repeatable; `*` allows any. Without it, a server bound to a wildcard address (`0.0.0.0`, `[::]`) answers any name, one bound to a given address only IP addresses and `localhost`'
            cand --model-name 'The model''s name in /v1/models and in responses [default: the GGUF''s name, else its file name]'
            cand --prompt 'The prompt text'
            cand --requests 'Run a batch job: JSON Lines requests (`id`, `prompt` or `messages`, `max_tokens`, `temperature`, `top_p`, `top_k`, `seed`, `stop`) served concurrently by one session; one JSON line per request''s result (or error) on stdout. `-` reads standard input'
            cand --queue 'With `--requests` or `--serve`: requests waiting for a slot at most (more are refused as `busy`, 429 when serving) [default: every request of the file; 64 when serving]'
            cand --groups 'With `--requests` or `--serve`: micro-batches in flight at most (the sequences are spread over this many groups) [default: one per stage, at most `--max-sequences`]'
            cand --prefill-budget-ms 'With `--requests` or `--serve`: a micro-batch carrying a prompt chunk while other sequences decode should come back within this many milliseconds; the chunk size follows what the session measures (0: chunks follow the row budget alone)'
            cand --speculate 'Speculative decoding: `ngram` drafts each sequence''s next tokens from its own prompt and output and verifies them in one trip through the pipeline (the output is the same tokens as without it)'
            cand --draft-max 'With `--speculate`: the most tokens drafted per trip (the length follows each sequence''s measured acceptance)'
            cand --draft-min 'With `--speculate`: the fewest tokens drafted per trip where the drafter has them, whatever the measured acceptance and row cost (0: the length adapts alone; at most `--draft-max`)'
            cand --draft-model 'A draft model (same vocabulary as the model) that proposes the drafts, run greedily by this process''s engine for every speculating sequence at once; implies speculation'
            cand --draft-threads 'With `--draft-model`: its compute threads in this process'
            cand --events 'Write every event of the run as JSON Lines to this file'
            cand --readiness-timeout 'Seconds to wait for every stage to be ready (weights loaded, edges up)'
            cand --token-timeout 'Seconds to wait for each token'
            cand --resume-timeout 'Seconds to wait for enough nodes to re-form after a node is lost; then every request the session held ends with the fault'
            cand --max-resumes 'Times one request may be resumed; past that it ends with the fault'
            cand --max-seq-len 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model''s trained context length, lowered to what the nodes'' memory holds; `run plan` says which and why]'
            cand --kv-cache 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)'
            cand --activation-dtype 'Element type of activations between stages (f32 is bit-exact with one process)'
            cand --max-tokens 'Most tokens to generate [default: until the end of sequence, a stop, or the context''s end; a server''s requests without `max_tokens` too]'
            cand --sampling 'How the last stage picks tokens'
            cand --temperature 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy'
            cand --top-k 'Keep only the K most likely tokens (with `--sampling sample`)'
            cand --top-p 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)'
            cand --seed 'Seed of the sampler (with `--sampling sample`)'
            cand --prompt-cache-bytes 'Bytes each stage''s node may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]'
            cand --run-id 'The run id (default: a fresh one, from this host''s clock in microseconds, so no two runs of an orchestrator share one)'
            cand --max-sequences 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1, or 8 with `--requests` or `--serve`]'
            cand --node-logs 'Pass the nodes'' logs through to stderr'
            cand --serve 'Serve the OpenAI-compatible HTTP API over the local pipeline instead of running one prompt or a requests file (see `orchestrate serve`)'
            cand --chat 'Wrap the prompt in the model''s chat template (ChatML, Llama 3 or Llama 2 style)'
            cand --stream 'With `--requests`: also a JSON line per generated token'
            cand --no-resume 'Fail the session at once when a stage node is lost, as before re-formation existed (default: re-form over the nodes left and resume every request)'
            cand --no-keep-caches 'Rebuild every stage''s caches from the replay after a re-formation (default: the stages that stay on their node with the same layers keep theirs, and only the stages that moved are rebuilt, from the rows the kept stages logged)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'swactor;run;help'= {
            cand plan 'Plan a run over a pool and predict its resources, without running anything'
            cand local 'Run a whole pipeline on this machine: N `swactor node boot` children on loopback, the orchestrator in this process; prints the generated text and cleans up'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;run;help;plan'= {
        }
        &'swactor;run;help;local'= {
        }
        &'swactor;run;help;help'= {
        }
        &'swactor;generate'= {
            cand --model 'The GGUF model'
            cand --prompt 'The prompt text'
            cand --prompt-ids 'The prompt as token ids, comma-separated (nothing is added: give the bos id yourself), instead of `--prompt`'
            cand --stages 'Split the model into this many stages in this process (activations cross each boundary as wire bytes, as in a pipeline)'
            cand --device 'Where to compute: `cpu` (swactor''s engine), `candle` (candle''s CPU ops, the reference), or `cuda:N` in a build with the `cuda` feature'
            cand --threads 'Compute threads (the in-process stages share them) [default: the CPUs available]'
            cand --speculate 'Speculative decoding: `ngram` drafts from the prompt and output so far and verifies each draft in one pass (the output is the same tokens as without it)'
            cand --draft-model 'A draft model (same vocabulary) that proposes the drafts, run greedily in this process; implies speculation'
            cand --draft-max 'The most tokens drafted per pass (the length follows the measured acceptance)'
            cand --max-seq-len 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model''s trained context length, lowered to what the nodes'' memory holds; `run plan` says which and why]'
            cand --kv-cache 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)'
            cand --activation-dtype 'Element type of activations between stages (f32 is bit-exact with one process)'
            cand --max-tokens 'Most tokens to generate [default: until the end of sequence, a stop, or the context''s end; a server''s requests without `max_tokens` too]'
            cand --sampling 'How the last stage picks tokens'
            cand --temperature 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy'
            cand --top-k 'Keep only the K most likely tokens (with `--sampling sample`)'
            cand --top-p 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)'
            cand --seed 'Seed of the sampler (with `--sampling sample`)'
            cand --max-sequences 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1]'
            cand --prompt-cache-bytes 'Bytes each stage''s node may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]'
            cand --chat 'Wrap the prompt in the model''s chat template (ChatML, Llama 3, Gemma or Llama 2 style), as `run local --chat` does'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'swactor;orchestrate'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand pool 'Wait for the pool to be ready, plan, provision every stage, inject the prompt, stream the generated text, and tear the run down'
            cand serve 'Serve the OpenAI-compatible HTTP API over the pool: form a session when the pool is ready, serve while it lasts, form a new one after a fault; SIGINT / SIGTERM drain within --grace-s and exit 0'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;orchestrate;pool'= {
            cand --pool 'The pool file'
            cand --model 'The GGUF model (the orchestrator''s copy: tokenizer and plan come from it)'
            cand --key 'The orchestrator''s key file (nodes were started with its endpoint id)'
            cand --stages 'Number of stages [default: one per placement node, or per pool node]'
            cand --layers 'Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`'
            cand --nodes 'Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order]'
            cand --balance 'What automatic layer ranges balance: the stages'' decode steps from the speed each node measured at boot (within its memory), or their bytes against node memory'
            cand --min-speedup 'Refuse a plan predicted to decode one sequence slower than X times the best single node that holds the model (`below_min_speedup`, exit 4)'
            cand --weights-url 'Nodes download the weights from this `http(s)://host[:port]/path` URL (checked against `--model`''s size and sha256) instead of reading `--model`''s path on their own disk'
            cand --listen 'iroh listen address (must be reachable by the nodes)'
            cand --swim 'SWIM listen address'
            cand --advertise 'The address other hosts reach this one at, when listening on an unspecified address (default: the local address of the route toward the pool''s nodes / join seeds; never `0.0.0.0`)'
            cand --swim-rtt-ms 'The longest round trip between pool members, milliseconds, for SWIM''s probe timings (members on wide-area links or behind relays: each probe waits 1.5 times it; up to 40 the LAN profile, failure detection in under a second)'
            cand --window-ms 'Convergence window in milliseconds'
            cand --pool-timeout 'Seconds to wait for the pool to be ready'
            cand --relay 'An iroh relay to reach peers through when no direct path exists, and to be reached through: `http://HOST:PORT` or `https://HOST[:PORT]`, e.g. one `swactor relay serve` runs (repeatable; the first is this host''s home relay). iroh moves a relayed connection to a direct path when one works'
            cand --relay-ca 'A PEM certificate an HTTPS relay''s certificate may chain to, beside the public roots (a relay serving a certificate of its own, e.g. self-signed)'
            cand --prompt 'The prompt text'
            cand --requests 'Run a batch job: JSON Lines requests (`id`, `prompt` or `messages`, `max_tokens`, `temperature`, `top_p`, `top_k`, `seed`, `stop`) served concurrently by one session; one JSON line per request''s result (or error) on stdout. `-` reads standard input'
            cand --queue 'With `--requests` or `--serve`: requests waiting for a slot at most (more are refused as `busy`, 429 when serving) [default: every request of the file; 64 when serving]'
            cand --groups 'With `--requests` or `--serve`: micro-batches in flight at most (the sequences are spread over this many groups) [default: one per stage, at most `--max-sequences`]'
            cand --prefill-budget-ms 'With `--requests` or `--serve`: a micro-batch carrying a prompt chunk while other sequences decode should come back within this many milliseconds; the chunk size follows what the session measures (0: chunks follow the row budget alone)'
            cand --speculate 'Speculative decoding: `ngram` drafts each sequence''s next tokens from its own prompt and output and verifies them in one trip through the pipeline (the output is the same tokens as without it)'
            cand --draft-max 'With `--speculate`: the most tokens drafted per trip (the length follows each sequence''s measured acceptance)'
            cand --draft-min 'With `--speculate`: the fewest tokens drafted per trip where the drafter has them, whatever the measured acceptance and row cost (0: the length adapts alone; at most `--draft-max`)'
            cand --draft-model 'A draft model (same vocabulary as the model) that proposes the drafts, run greedily by this process''s engine for every speculating sequence at once; implies speculation'
            cand --draft-threads 'With `--draft-model`: its compute threads in this process'
            cand --events 'Write every event of the run as JSON Lines to this file'
            cand --readiness-timeout 'Seconds to wait for every stage to be ready (weights loaded, edges up)'
            cand --token-timeout 'Seconds to wait for each token'
            cand --resume-timeout 'Seconds to wait for enough nodes to re-form after a node is lost; then every request the session held ends with the fault'
            cand --max-resumes 'Times one request may be resumed; past that it ends with the fault'
            cand --max-seq-len 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model''s trained context length, lowered to what the nodes'' memory holds; `run plan` says which and why]'
            cand --kv-cache 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)'
            cand --activation-dtype 'Element type of activations between stages (f32 is bit-exact with one process)'
            cand --max-tokens 'Most tokens to generate [default: until the end of sequence, a stop, or the context''s end; a server''s requests without `max_tokens` too]'
            cand --sampling 'How the last stage picks tokens'
            cand --temperature 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy'
            cand --top-k 'Keep only the K most likely tokens (with `--sampling sample`)'
            cand --top-p 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)'
            cand --seed 'Seed of the sampler (with `--sampling sample`)'
            cand --prompt-cache-bytes 'Bytes each stage''s node may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]'
            cand --run-id 'The run id (default: a fresh one, from this host''s clock in microseconds, so no two runs of an orchestrator share one)'
            cand --max-sequences 'Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per slot [default: 1, or 8 with `--requests`]'
            cand --auto-stages 'Choose the stage count and nodes: of every count, the fastest nodes (by the speed each measured at boot) that hold the model, the plan predicted to decode fastest; fewer stages win ties (so slow links get fewer hops)'
            cand --relay-only 'Use the relays alone: open no QUIC port (for a host that must not expose one)'
            cand --chat 'Wrap the prompt in the model''s chat template (ChatML, Llama 3 or Llama 2 style)'
            cand --stream 'With `--requests`: also a JSON line per generated token'
            cand --no-resume 'Fail the session at once when a stage node is lost, as before re-formation existed (default: re-form over the nodes left and resume every request)'
            cand --no-keep-caches 'Rebuild every stage''s caches from the replay after a re-formation (default: the stages that stay on their node with the same layers keep theirs, and only the stages that moved are rebuilt, from the rows the kept stages logged)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'swactor;orchestrate;serve'= {
            cand --pool 'The pool file'
            cand --model 'The GGUF model (the orchestrator''s copy: tokenizer, chat template, facts)'
            cand --key 'The orchestrator''s key file (created on first use)'
            cand --stages 'Number of stages [default: one per placement node, or per pool node]'
            cand --layers 'Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`'
            cand --nodes 'Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order]'
            cand --balance 'What automatic layer ranges balance: the stages'' decode steps from the speed each node measured at boot (within its memory), or their bytes against node memory'
            cand --min-speedup 'Refuse a plan predicted to decode one sequence slower than X times the best single node that holds the model (`below_min_speedup`, exit 4)'
            cand --weights-url 'Nodes fetch their stage''s weights from this URL instead of their own copy'
            cand --listen 'iroh listen address (must be reachable by the nodes)'
            cand --swim 'SWIM listen address'
            cand --advertise 'The address other hosts reach this one at, when listening on an unspecified address (default: the local address of the route toward the pool''s nodes / join seeds; never `0.0.0.0`)'
            cand --swim-rtt-ms 'The longest round trip between pool members, milliseconds, for SWIM''s probe timings (members on wide-area links or behind relays: each probe waits 1.5 times it; up to 40 the LAN profile, failure detection in under a second)'
            cand --window-ms 'Convergence window in milliseconds'
            cand --pool-timeout 'Seconds to wait for the pool to be ready'
            cand --relay 'An iroh relay to reach peers through when no direct path exists, and to be reached through: `http://HOST:PORT` or `https://HOST[:PORT]`, e.g. one `swactor relay serve` runs (repeatable; the first is this host''s home relay). iroh moves a relayed connection to a direct path when one works'
            cand --relay-ca 'A PEM certificate an HTTPS relay''s certificate may chain to, beside the public roots (a relay serving a certificate of its own, e.g. self-signed)'
            cand --http 'Where the HTTP API listens [default: 127.0.0.1:8080]'
            cand --grace-s 'Seconds a stop (SIGINT / SIGTERM) lets requests in flight finish before it cancels them [default: 30]'
            cand --api-key-file 'A file holding the API key: every route but /health and the page then needs `Authorization: Bearer KEY`'
            cand --max-body-bytes 'Request bodies over this many bytes are refused with 413 [default: 8388608]'
            cand --max-connections 'HTTP connections open at once; a client past them is answered 503 at once [default: 256]'
            cand --max-connections-per-peer 'HTTP connections open at once from one IP address; a client past them is answered 429 at once (behind a proxy on this host every client is one address) [default: half of `--max-connections`]'
            cand --header-timeout-s 'Seconds a request''s headers may take to arrive (and an idle kept-alive connection stays open) [default: 10]'
            cand --body-timeout-s 'Seconds a request''s body may take to arrive once its headers have; then 408 and the connection closes [default: 30]'
            cand --cors-origin 'A page origin (`scheme://host[:port]`) allowed to call the API from a browser, besides the server''s own page and localhost pages; repeatable; `*` allows any'
            cand --allowed-host 'A host name (or `name:port`) requests may name in `Host`, besides IP addresses and `localhost` (this stops DNS rebinding); repeatable; `*` allows any. Without it, a server bound to a wildcard address (`0.0.0.0`, `[::]`) answers any name, one bound to a given address only IP addresses and `localhost`'
            cand --model-name 'The model''s name in /v1/models and in responses [default: the GGUF''s name, else its file name]'
            cand --speculate 'Speculative decoding: `ngram` drafts each sequence''s next tokens from its own prompt and output and verifies them in one trip through the pipeline (the output is the same tokens as without it)'
            cand --draft-max 'With `--speculate`: the most tokens drafted per trip (the length follows each sequence''s measured acceptance)'
            cand --draft-min 'With `--speculate`: the fewest tokens drafted per trip where the drafter has them, whatever the measured acceptance and row cost (0: the length adapts alone; at most `--draft-max`)'
            cand --draft-model 'A draft model (same vocabulary as the model) that proposes the drafts, run greedily by this process''s engine for every speculating sequence at once; implies speculation'
            cand --draft-threads 'With `--draft-model`: its compute threads in this process'
            cand --resume-timeout 'Seconds to wait for enough nodes to re-form after a node is lost; then every request the session held ends with the fault'
            cand --max-resumes 'Times one request may be resumed; past that it ends with the fault'
            cand --max-seq-len 'Longest sequence (prompt + generated tokens) the KV caches hold [default: the model''s trained context length, lowered to what the nodes'' memory holds; `run plan` says which and why]'
            cand --kv-cache 'Element type of the KV caches: f16 halves their memory (the values are rounded to f16 as they are stored; the CPU engine only)'
            cand --activation-dtype 'Element type of activations between stages (f32 is bit-exact with one process)'
            cand --max-tokens 'Most tokens to generate [default: until the end of sequence, a stop, or the context''s end; a server''s requests without `max_tokens` too]'
            cand --sampling 'How the last stage picks tokens'
            cand --temperature 'Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy'
            cand --top-k 'Keep only the K most likely tokens (with `--sampling sample`)'
            cand --top-p 'Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`)'
            cand --seed 'Seed of the sampler (with `--sampling sample`)'
            cand --prompt-cache-bytes 'Bytes each stage''s node may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables) [default: a quarter of the memory the node has left after its stage, at most 4 GiB]'
            cand --max-sequences 'Sequences served at once, the session''s slots (1 to 256): every stage holds a KV cache per slot [default: 8]'
            cand --queue 'Requests waiting for a slot at most; more are refused with 429 [default: 64]'
            cand --groups 'Micro-batches in flight at most [default: one per stage, at most `--max-sequences`]'
            cand --prefill-budget-ms 'A micro-batch carrying a prompt chunk while other sequences decode should come back within this many milliseconds; the chunk size follows what the session measures (0: chunks follow the row budget alone)'
            cand --events 'Write every session''s events as JSON Lines to this file (never overwritten)'
            cand --readiness-timeout 'Seconds each session may take from provisioning to serving'
            cand --token-timeout 'Seconds a micro-batch in flight may take to come back before the session faults'
            cand --auto-stages 'Choose the stage count and nodes: of every count, the fastest nodes (by the speed each measured at boot) that hold the model, the plan predicted to decode fastest; fewer stages win ties (so slow links get fewer hops)'
            cand --relay-only 'Use the relays alone: open no QUIC port (for a host that must not expose one)'
            cand --no-resume 'Fail the session at once when a stage node is lost, as before re-formation existed (default: re-form over the nodes left and resume every request)'
            cand --no-keep-caches 'Rebuild every stage''s caches from the replay after a re-formation (default: the stages that stay on their node with the same layers keep theirs, and only the stages that moved are rebuilt, from the rows the kept stages logged)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'swactor;orchestrate;help'= {
            cand pool 'Wait for the pool to be ready, plan, provision every stage, inject the prompt, stream the generated text, and tear the run down'
            cand serve 'Serve the OpenAI-compatible HTTP API over the pool: form a session when the pool is ready, serve while it lasts, form a new one after a fault; SIGINT / SIGTERM drain within --grace-s and exit 0'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;orchestrate;help;pool'= {
        }
        &'swactor;orchestrate;help;serve'= {
        }
        &'swactor;orchestrate;help;help'= {
        }
        &'swactor;model'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand inspect 'Print the facts of a GGUF model: shape, tokenizer, rope, tensor bytes'
            cand synth 'Write a deterministic tiny model of any supported family (`--arch`) with random weights and a real BPE vocabulary'
            cand quantize 'Re-quantize a model''s weight matrices (norms stay f32)'
            cand tokenize 'Print the token ids of a text as the model''s tokenizer splits it (`--json`: the ids and each token''s text)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;model;inspect'= {
            cand --stages 'Show the layers and weight bytes of each of N stages (the planner''s balance over nodes of equal memory) [default: 2, or 1 for a one-block model]'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;model;synth'= {
            cand --out 'Where to write the GGUF file'
            cand --blocks 'Transformer blocks'
            cand --hidden 'Hidden size'
            cand --heads 'Attention heads'
            cand --kv-heads 'Key/value heads (grouped-query attention)'
            cand --ffn 'Feed-forward inner size'
            cand --vocab 'Vocabulary size (at least 257: 256 bytes and an end-of-text token)'
            cand --context 'Context length recorded in the file'
            cand --dtype 'Storage type of the weight matrices'
            cand --arch 'The family written: llama (Llama 2 style), llama3, qwen2, qwen3, gemma3, or a mixture of experts: qwen3moe, qwen2moe, mixtral, gpt-oss (`--ffn` is then each expert''s)'
            cand --experts 'Experts per block of a mixture-of-experts family'
            cand --experts-used 'Experts each token runs (mixture-of-experts families)'
            cand --head-dim 'Each attention head''s size (default: the family''s, from hidden / heads)'
            cand --seed 'Seed of the random weights'
            cand --vocab-from 'Take the tokenizer of this GGUF model (its tokens, merges, special ids, chat template) instead of synthesizing one: the model shares its vocabulary (a tiny draft model for it). The vocabulary size is its token count'
            cand --tied-embeddings 'Reuse the token embedding as the output head (no `output.weight`)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'swactor;model;quantize'= {
            cand --in 'The GGUF model to read'
            cand --out 'Where to write the re-quantized model'
            cand --dtype 'Target type: f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, a K-quant mix as llama.cpp makes it: q4_k_m, q5_k_m (Q6_K where more bits pay), or mxfp4_moe (routed experts in MXFP4, the rest Q8_0). Routers stay as they are'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;model;tokenize'= {
            cand --model 'The GGUF model whose tokenizer is used'
            cand --text 'The text (repeat the flag for several texts: one line of ids each)'
            cand --add-special 'Add the model''s bos token where its tokenizer does'
            cand --parse-special 'Match control tokens written in the text (`<|im_start|>`, `<start_of_turn>`, ...)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;model;help'= {
            cand inspect 'Print the facts of a GGUF model: shape, tokenizer, rope, tensor bytes'
            cand synth 'Write a deterministic tiny model of any supported family (`--arch`) with random weights and a real BPE vocabulary'
            cand quantize 'Re-quantize a model''s weight matrices (norms stay f32)'
            cand tokenize 'Print the token ids of a text as the model''s tokenizer splits it (`--json`: the ids and each token''s text)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;model;help;inspect'= {
        }
        &'swactor;model;help;synth'= {
        }
        &'swactor;model;help;quantize'= {
        }
        &'swactor;model;help;tokenize'= {
        }
        &'swactor;model;help;help'= {
        }
        &'swactor;node'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand id 'Print this node''s identity (endpoint id) from its key file, creating the key (0600) on first use. The endpoint id is what pool files name'
            cand boot 'Boot this host as a pool node (identity, arena, worker, iroh endpoint, SWIM, control inbox, admin socket) and serve until SIGINT or SIGTERM'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;node;id'= {
            cand --key 'The node''s key file'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;node;boot'= {
            cand --node-id 'This node''s id, as the pool file names it'
            cand --key 'The node''s key file (created 0600 on first boot)'
            cand --listen 'iroh (QUIC) listen address'
            cand --swim 'SWIM (UDP) listen address'
            cand --swim-rtt-ms 'The longest round trip between pool members, milliseconds, for SWIM''s probe timings (members on wide-area links or behind relays: each probe waits 1.5 times it; up to 40 the LAN profile, failure detection in under a second)'
            cand --advertise 'The address other hosts reach this one at, when listening on an unspecified address (default: the local address of the route toward the pool''s nodes / join seeds; never `0.0.0.0`)'
            cand --relay 'An iroh relay to reach peers through when no direct path exists, and to be reached through: `http://HOST:PORT` or `https://HOST[:PORT]`, e.g. one `swactor relay serve` runs (repeatable; the first is this host''s home relay). iroh moves a relayed connection to a direct path when one works'
            cand --relay-ca 'A PEM certificate an HTTPS relay''s certificate may chain to, beside the public roots (a relay serving a certificate of its own, e.g. self-signed)'
            cand --join 'SWIM addresses of other members to join through (repeatable): `HOST:PORT`, or a relay-only member''s `relay:<endpoint id>@<relay url>` as it prints it'
            cand --orchestrator 'The orchestrator''s endpoint id: the only peer allowed to control this node'
            cand --arena-bytes 'Arena size in bytes'
            cand --memory-bytes 'Memory this node can give a stage (weights, KV cache, rings), reported in `node_available` [default: the host''s available memory]'
            cand --prompt-cache-bytes 'The most bytes this node''s stage may keep of evicted prompt prefixes (its layers'' KV, in host memory; 0 disables), reported in `node_available`; with the orchestrator''s `--prompt-cache-bytes` too, the smaller holds [default: the orchestrator''s budget]'
            cand --device 'Where the stage computes: `cpu`, or `cuda:N` (an NVIDIA GPU; needs a build with the `cuda` feature). Checked at boot: a build without CUDA or a missing device faults the boot (`device_unavailable`, exit 6). Reported in `node_available`'
            cand --threads 'Compute threads of the worker''s stage (`--worker-threads` is an older name; one node per host, its one worker using the host''s cores) [default: every CPU this process may use]'
            cand --admin 'Admin socket for `swactor edge inspect` [default: swactor-node-ID-KEY.sock in the runtime or temporary directory, KEY being the first 16 digits of the endpoint id]. An existing file there is never touched: only a stale socket is replaced'
            cand --cache 'Directory for downloaded weights (default: $XDG_CACHE_HOME/swactor/weights)'
            cand --boot-timeout-ms 'Milliseconds the boot may take; past it the node faults with the resource it was waiting for (exit 6)'
            cand --max-worker-restarts 'Restarts of a crashed worker before the node faults and stops [default: any number]'
            cand --relay-only 'Use the relays alone: open no QUIC port (for a host that must not expose one)'
            cand --no-calibrate 'Do not measure this host''s speed at boot: the node reports none, and a plan over it balances by memory and predicts no speed (`run local`''s nodes, which share a host, boot so)'
            cand --stop-on-stdin-eof 'Stop when standard input closes (for supervisors such as `run local`)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;node;help'= {
            cand id 'Print this node''s identity (endpoint id) from its key file, creating the key (0600) on first use. The endpoint id is what pool files name'
            cand boot 'Boot this host as a pool node (identity, arena, worker, iroh endpoint, SWIM, control inbox, admin socket) and serve until SIGINT or SIGTERM'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;node;help;id'= {
        }
        &'swactor;node;help;boot'= {
        }
        &'swactor;node;help;help'= {
        }
        &'swactor;edge'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand inspect 'Show a node''s edge records (state, ring, peers) and what it sees of the pool'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;edge;inspect'= {
            cand --node 'The node''s admin socket'
            cand --edge 'Show only this edge'
            cand --timeout-ms 'Milliseconds to wait for the node''s answer'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;edge;help'= {
            cand inspect 'Show a node''s edge records (state, ring, peers) and what it sees of the pool'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;edge;help;inspect'= {
        }
        &'swactor;edge;help;help'= {
        }
        &'swactor;cache'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand ls 'List the downloaded weights: file, kind (whole or a stage''s ranges), size, URL, sha256'
            cand clear 'Remove the downloaded weights (only the cache''s own files in the directory)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;cache;ls'= {
            cand --cache 'The weights cache directory, as given to `node boot --cache` (default: $XDG_CACHE_HOME/swactor/weights)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;cache;clear'= {
            cand --cache 'The weights cache directory, as given to `node boot --cache` (default: $XDG_CACHE_HOME/swactor/weights)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;cache;help'= {
            cand ls 'List the downloaded weights: file, kind (whole or a stage''s ranges), size, URL, sha256'
            cand clear 'Remove the downloaded weights (only the cache''s own files in the directory)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;cache;help;ls'= {
        }
        &'swactor;cache;help;clear'= {
        }
        &'swactor;cache;help;help'= {
        }
        &'swactor;pool'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand watch 'Observe a pool read-only: connect to every node of a pool file with the orchestrator''s delegation (never as the orchestrator), and report availability, liveness as the nodes'' SWIM sees it, and pool readiness (ready = every node available, live and unchanged for the convergence window). Safe beside a run'
            cand init 'Write a pool file from what the nodes printed: the `node_available` lines of `node boot --json` (from files, or standard input), so nobody copies endpoint ids by hand. Each node''s reported memory becomes its `memory_bytes` (left out when it reported none: `orchestrate pool` then takes the node''s report); the pool is checked as `run plan` checks a pool file'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;pool;watch'= {
            cand --pool 'The pool file'
            cand --key 'The orchestrator''s key file (nodes were started with its endpoint id). It only vouches for the watch, which holds a key of its own and observes read-only: it may run beside `orchestrate pool` with the same file'
            cand --listen 'iroh listen address (the watch only connects out; it joins no membership)'
            cand --relay 'An iroh relay to reach peers through when no direct path exists, and to be reached through: `http://HOST:PORT` or `https://HOST[:PORT]`, e.g. one `swactor relay serve` runs (repeatable; the first is this host''s home relay). iroh moves a relayed connection to a direct path when one works'
            cand --relay-ca 'A PEM certificate an HTTPS relay''s certificate may chain to, beside the public roots (a relay serving a certificate of its own, e.g. self-signed)'
            cand --window-ms 'Convergence window in milliseconds'
            cand --pool-timeout 'Give up (exit 8) when the pool is not ready within S seconds [default: wait on]'
            cand --relay-only 'Use the relays alone: open no QUIC port (for a host that must not expose one)'
            cand --until-ready 'Exit once the pool is ready'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;pool;init'= {
            cand --orchestrator-node-id 'The orchestrator''s node id in the pool'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;pool;help'= {
            cand watch 'Observe a pool read-only: connect to every node of a pool file with the orchestrator''s delegation (never as the orchestrator), and report availability, liveness as the nodes'' SWIM sees it, and pool readiness (ready = every node available, live and unchanged for the convergence window). Safe beside a run'
            cand init 'Write a pool file from what the nodes printed: the `node_available` lines of `node boot --json` (from files, or standard input), so nobody copies endpoint ids by hand. Each node''s reported memory becomes its `memory_bytes` (left out when it reported none: `orchestrate pool` then takes the node''s report); the pool is checked as `run plan` checks a pool file'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;pool;help;watch'= {
        }
        &'swactor;pool;help;init'= {
        }
        &'swactor;pool;help;help'= {
        }
        &'swactor;relay'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand serve 'Serve an iroh relay for the pool''s hosts behind NAT (nodes and orchestrators name it with `--relay URL`), until SIGINT or SIGTERM. Plain HTTP without a certificate (tests, trusted networks), HTTPS with `--cert` and `--key`'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;relay;serve'= {
            cand --listen 'Where the relay listens (TCP)'
            cand --host 'The host name (or IP) in the relay''s URL, as the pool''s hosts reach it (default: the listen address''s IP; must match the certificate with `--cert`)'
            cand --cert 'The certificate chain (PEM) to serve HTTPS with'
            cand --key 'The certificate''s private key (PEM)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;relay;help'= {
            cand serve 'Serve an iroh relay for the pool''s hosts behind NAT (nodes and orchestrators name it with `--relay URL`), until SIGINT or SIGTERM. Plain HTTP without a certificate (tests, trusted networks), HTTPS with `--cert` and `--key`'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;relay;help;serve'= {
        }
        &'swactor;relay;help;help'= {
        }
        &'swactor;chat'= {
            cand --system 'A system message that opens the conversation'
            cand --server 'The server''s URL'
            cand --api-key-file 'A file holding the API key [default: $SWACTOR_API_KEY, if set]'
            cand --max-tokens 'Tokens to generate at most [default: the server''s]'
            cand --temperature 'Sampling temperature (0 is greedy) [default: the server''s]'
            cand --seed 'The sampler''s seed'
            cand --stop 'A string that ends the answer (repeatable)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;complete'= {
            cand --prompt 'The prompt (`-` reads it from standard input)'
            cand --server 'The server''s URL'
            cand --api-key-file 'A file holding the API key [default: $SWACTOR_API_KEY, if set]'
            cand --max-tokens 'Tokens to generate at most [default: the server''s]'
            cand --temperature 'Sampling temperature (0 is greedy) [default: the server''s]'
            cand --seed 'The sampler''s seed'
            cand --stop 'A string that ends the answer (repeatable)'
            cand --stream 'Print the text as it is generated'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand ring 'Cross-process ring throughput (node producer -> ingress ring -> a real worker''s device copy) as a ratio of plain memcpy bandwidth measured in the same run'
            cand wake 'Wake round trip: a small object written into an ingress ring until the worker''s `ObjectLoaded` line is read back (median and p99)'
            cand edge 'Edge throughput (egress ring -> send pump -> QUIC -> receive pump -> ingress ring) beside raw iroh stream throughput, and the hop latency of a decode-sized object'
            cand decode 'Decode tokens/s of `swactor generate` at one compute thread: the whole model against the same model split into in-process stages, for the model and re-quantized copies of it'
            cand pipeline 'Decode tokens/s of a `run local` pipeline (one node process per stage, one compute thread each) against `swactor generate` at one thread, and the time from `run local`''s start to its first token'
            cand engine 'The CPU engine on one or more models (and re-quantized copies): decode and prefill tokens/s at each thread count, aggregate decode at several batch sizes, and stage load time (mapped, against candle''s copying load). `scripts/bench-llama-cpp.py` runs it beside llama.cpp'
            cand products 'The engine''s matrix products one at a time on a model''s own weights: time per product against the bytes it reads and this machine''s memory read bandwidth (measured in the same run), beside the whole forward pass, for a decode step and prefills'
            cand speculate 'Speculative decoding: one sequence''s decode tokens/s with and without n-gram drafts, in one process and through a `run local` pipeline, on a grounded workload (text the answer repeats or edits) and on free generation, each pair side by side'
            cand failover 'Fault detection: SIGKILLs a stage node of a local pipeline mid-decode and measures the time to `run_faulted` and to `run_torn_down`'
            cand serve 'Serving: a `run local` session with 1, 2, 4, 8 and 16 concurrent greedy requests (aggregate decode tokens/s, time to first token and inter-token latency p50 / p95) beside one-sequence `swactor generate` with the same total compute threads'
            cand prefix 'The prefix cache: a multi-turn conversation served by `run local --serve` (each turn a completion of the transcript so far), each turn sent with the cache and again with `cache_prompt: false` (time to first token, cached tokens per turn), then conversations sharing a long system prompt at once, with and without it (aggregate tokens/s)'
            cand structured 'Constrained output: the same chat prompts with a JSON schema in `response_format` and without, side by side in one server; decode tokens/s of each and their ratio, and how many constrained replies parsed with the schema''s keys'
            cand wan 'Wide-area links: a pipeline of node processes (one compute thread each), each host in its own network namespace behind a link of each round trip (`util wan-link`), and relay-only through a relay, with and without n-gram speculation; decode tokens/s and time to first token measured beside what the plan predicted, and their ratio. Needs root (network namespaces, iptables)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;bench;ring'= {
            cand --ring-mib 'Ring data capacity in MiB (the planner''s largest activation ring)'
            cand --span-kib 'Bytes the producer writes at a time, in KiB'
            cand --object-mib 'Object size in MiB'
            cand --total-mib 'Bytes to stream in MiB'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;wake'= {
            cand --samples 'Round trips to measure'
            cand --bytes 'Object payload bytes (a multiple of 4)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;edge'= {
            cand --mib 'MiB to stream in each throughput run'
            cand --object-bytes 'Object size of the latency run (a decode-sized activation by default)'
            cand --samples 'Latency samples'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;decode'= {
            cand --model 'The GGUF model; again for more models, measured one after another in the same run (`--requantize` copies the first)'
            cand --stages 'Stages of the split run'
            cand --tokens 'Tokens to generate per run'
            cand --requantize 'Also measure copies re-quantized to these types (e.g. `q8_0,q4_0`)'
            cand --repeat 'Runs of each configuration (the best is kept)'
            cand --synth-1b 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`: 22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000, Q4_0): figures at a real size beside the model''s'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;pipeline'= {
            cand --model 'The GGUF model; again for more models, measured one after another in the same run (`--requantize` copies the first)'
            cand --stages 'Stages of the split run'
            cand --tokens 'Tokens to generate per run'
            cand --requantize 'Also measure copies re-quantized to these types (e.g. `q8_0,q4_0`)'
            cand --repeat 'Runs of each configuration (the best is kept)'
            cand --synth-1b 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`: 22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000, Q4_0): figures at a real size beside the model''s'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;engine'= {
            cand --model 'A GGUF model (repeatable)'
            cand --requantize 'Also measure copies of the first model re-quantized to these types (e.g. `q8_0,q4_0,q4_k`)'
            cand --threads 'Compute thread counts to measure'
            cand --tokens 'Tokens decoded per run'
            cand --prompt-tokens 'Lengths of the prefill prompts (one prefill measured at each)'
            cand --batch 'Batch sizes of the aggregate decode'
            cand --repeat 'Runs of each measurement (the best is kept)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;products'= {
            cand --model 'The GGUF model'
            cand --formats 'Instead of a model''s products: each of these weight formats'' single-row product on a `--cols`-wide matrix of pseudo-random weights resident in cache (`all`: every format the engine reads)'
            cand --cols 'With `--formats`: input columns of each matrix (a multiple of 256)'
            cand --threads 'Compute thread counts to measure'
            cand --rows 'Activation rows of each forward pass measured (1: a decode step; more: a prefill)'
            cand --repeat 'Runs of each measurement (the best is kept)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;speculate'= {
            cand --model 'The GGUF model'
            cand --grounded 'The grounded workload: JSON Lines of `{"prompt", "max_tokens"}`'
            cand --stages 'Stages of the pipeline layout'
            cand --tokens 'Tokens per free-generation prompt'
            cand --free 'Free-generation prompts (story openings)'
            cand --draft-model 'Draft with this model (same vocabulary) instead of n-gram lookup'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;failover'= {
            cand --stages 'Stages of the local pipeline (node 2 is killed)'
            cand --model 'With `--resume`: the GGUF model served'
            cand --sequences 'With `--resume`: requests in flight, each a series'
            cand --tokens 'With `--resume`: tokens each request generates'
            cand --kill-after 'With `--resume`: tokens every request has when node 2 is killed (a longer history is a longer replay)'
            cand --repeat 'Runs (each on a fresh local pool)'
            cand --resume 'Resume instead of failing: the session re-forms over a spare node and, in a second series, over the survivors alone; the time from the kill to the first resumed token and its parts'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;serve'= {
            cand --model 'The GGUF model; again for more models, measured one after another in the same run (`--requantize` copies the first)'
            cand --stages 'Stages of the session (one node process each)'
            cand --layout 'How the stages share this host''s cores (`run local --layout`)'
            cand --threads 'Compute threads of each stage worker (the baselines get every core of the host) [default: the layout''s]'
            cand --tokens 'Tokens each request generates'
            cand --concurrency 'Concurrency levels'
            cand --requantize 'Also measure copies re-quantized to these types (e.g. `q8_0`)'
            cand --groups 'Micro-batches in flight at most (`run local --groups`) [default: the layout''s]'
            cand --prefill-budget-ms 'The session''s prefill time budget (`run local --prefill-budget-ms`) [default: the session''s]'
            cand --repeat 'Runs per level (each a batch job and, with --http, the same through HTTP, one after the other); the medians are printed'
            cand --synth-1b 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`: 22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000, Q4_0): figures at a real size beside the model''s'
            cand --http 'Also serve each level through the HTTP API (`run local --serve`, N concurrent streamed completions measured by the client) beside the batch job''s figures'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'swactor;bench;prefix'= {
            cand --model 'The GGUF model; again for more models, measured one after another in the same run'
            cand --stages 'Stages of the session (one node process each)'
            cand --threads 'Compute threads of each stage worker'
            cand --turns 'Turns of the conversation'
            cand --turn-words 'Words of user text each turn adds (about a token each)'
            cand --reply-tokens 'Tokens each reply generates at most'
            cand --conversations 'Conversations at once sharing one system prompt (0: that part is skipped)'
            cand --system-words 'Words of the shared system prompt'
            cand --shared-turns 'Turns of each of those conversations (and of the crowded part''s)'
            cand --crowd 'Conversations taking turns one after another, twice as many as the slots by default, so that each finds its history in the stages'' block stores, not in its slot (0: that part is skipped)'
            cand --max-seq-len 'Each sequence''s context [default: the server''s: the model''s trained length as far as memory holds it]'
            cand --synth-1b 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`), at a real size beside the model''s'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;structured'= {
            cand --model 'The GGUF model; again for more models, measured one after another in the same run'
            cand --stages 'Stages of the session (one node process each)'
            cand --threads 'Compute threads of each stage worker'
            cand --requests 'Requests of each kind (constrained and free), in turns'
            cand --max-tokens 'Tokens each reply generates at most (enough for the schema''s bounded object)'
            cand --synth-1b 'Also measure a 1.1B llama written on the fly into the scratch directory (`model synth`; its text is noise, but the schema still holds it)'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;wan'= {
            cand --model 'The GGUF model'
            cand --stages 'Stages (one host namespace and node process each)'
            cand --loss 'Share of datagrams each link loses each way, 0..=1'
            cand --rate-mbit 'Megabits per second each link carries each way (default: unlimited; not the relay)'
            cand --links 'The links: `direct`, a round trip in milliseconds, or `relay`'
            cand --tokens 'Tokens to generate per run'
            cand --prompt 'The prompt (by default one whose answer repeats it, where n-gram drafts land)'
            cand --no-speculate 'Leave out the runs with n-gram speculation'
            cand --mixed 'Also run nodes of different speed (every host but the first on the scalar kernels) with ranges balanced by speed and by memory, side by side'
            cand --json 'Print JSON Lines (one object per line with a `type` tag) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'swactor;bench;help'= {
            cand ring 'Cross-process ring throughput (node producer -> ingress ring -> a real worker''s device copy) as a ratio of plain memcpy bandwidth measured in the same run'
            cand wake 'Wake round trip: a small object written into an ingress ring until the worker''s `ObjectLoaded` line is read back (median and p99)'
            cand edge 'Edge throughput (egress ring -> send pump -> QUIC -> receive pump -> ingress ring) beside raw iroh stream throughput, and the hop latency of a decode-sized object'
            cand decode 'Decode tokens/s of `swactor generate` at one compute thread: the whole model against the same model split into in-process stages, for the model and re-quantized copies of it'
            cand pipeline 'Decode tokens/s of a `run local` pipeline (one node process per stage, one compute thread each) against `swactor generate` at one thread, and the time from `run local`''s start to its first token'
            cand engine 'The CPU engine on one or more models (and re-quantized copies): decode and prefill tokens/s at each thread count, aggregate decode at several batch sizes, and stage load time (mapped, against candle''s copying load). `scripts/bench-llama-cpp.py` runs it beside llama.cpp'
            cand products 'The engine''s matrix products one at a time on a model''s own weights: time per product against the bytes it reads and this machine''s memory read bandwidth (measured in the same run), beside the whole forward pass, for a decode step and prefills'
            cand speculate 'Speculative decoding: one sequence''s decode tokens/s with and without n-gram drafts, in one process and through a `run local` pipeline, on a grounded workload (text the answer repeats or edits) and on free generation, each pair side by side'
            cand failover 'Fault detection: SIGKILLs a stage node of a local pipeline mid-decode and measures the time to `run_faulted` and to `run_torn_down`'
            cand serve 'Serving: a `run local` session with 1, 2, 4, 8 and 16 concurrent greedy requests (aggregate decode tokens/s, time to first token and inter-token latency p50 / p95) beside one-sequence `swactor generate` with the same total compute threads'
            cand prefix 'The prefix cache: a multi-turn conversation served by `run local --serve` (each turn a completion of the transcript so far), each turn sent with the cache and again with `cache_prompt: false` (time to first token, cached tokens per turn), then conversations sharing a long system prompt at once, with and without it (aggregate tokens/s)'
            cand structured 'Constrained output: the same chat prompts with a JSON schema in `response_format` and without, side by side in one server; decode tokens/s of each and their ratio, and how many constrained replies parsed with the schema''s keys'
            cand wan 'Wide-area links: a pipeline of node processes (one compute thread each), each host in its own network namespace behind a link of each round trip (`util wan-link`), and relay-only through a relay, with and without n-gram speculation; decode tokens/s and time to first token measured beside what the plan predicted, and their ratio. Needs root (network namespaces, iptables)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;bench;help;ring'= {
        }
        &'swactor;bench;help;wake'= {
        }
        &'swactor;bench;help;edge'= {
        }
        &'swactor;bench;help;decode'= {
        }
        &'swactor;bench;help;pipeline'= {
        }
        &'swactor;bench;help;engine'= {
        }
        &'swactor;bench;help;products'= {
        }
        &'swactor;bench;help;speculate'= {
        }
        &'swactor;bench;help;failover'= {
        }
        &'swactor;bench;help;serve'= {
        }
        &'swactor;bench;help;prefix'= {
        }
        &'swactor;bench;help;structured'= {
        }
        &'swactor;bench;help;wan'= {
        }
        &'swactor;bench;help;help'= {
        }
        &'swactor;help'= {
            cand run 'Run a whole pipeline on this machine (`run local`), or plan one over a pool (`run plan`)'
            cand generate 'Generate text with a whole model in this one process (the pipeline''s reference)'
            cand orchestrate 'Run a prompt through a pool of `swactor node boot` hosts'
            cand model 'Inspect and synthesize GGUF models'
            cand node 'Run this host as a pool node, or print its identity'
            cand edge 'Inspect the live edges of a node'
            cand cache 'List or clear a node''s downloaded weights'
            cand pool 'Watch a pool from the orchestrator''s side'
            cand relay 'Host an iroh relay for pool members behind NAT'
            cand chat 'Chat with a swactor server: an interactive loop on a terminal (the conversation is kept), one exchange from standard input otherwise'
            cand complete 'Ask a swactor server to complete a prompt; the text on stdout (streamed with --stream), the whole response with --json'
            cand bench 'Measure the data plane on this machine (each figure beside its baseline)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'swactor;help;run'= {
            cand plan 'Plan a run over a pool and predict its resources, without running anything'
            cand local 'Run a whole pipeline on this machine: N `swactor node boot` children on loopback, the orchestrator in this process; prints the generated text and cleans up'
        }
        &'swactor;help;run;plan'= {
        }
        &'swactor;help;run;local'= {
        }
        &'swactor;help;generate'= {
        }
        &'swactor;help;orchestrate'= {
            cand pool 'Wait for the pool to be ready, plan, provision every stage, inject the prompt, stream the generated text, and tear the run down'
            cand serve 'Serve the OpenAI-compatible HTTP API over the pool: form a session when the pool is ready, serve while it lasts, form a new one after a fault; SIGINT / SIGTERM drain within --grace-s and exit 0'
        }
        &'swactor;help;orchestrate;pool'= {
        }
        &'swactor;help;orchestrate;serve'= {
        }
        &'swactor;help;model'= {
            cand inspect 'Print the facts of a GGUF model: shape, tokenizer, rope, tensor bytes'
            cand synth 'Write a deterministic tiny model of any supported family (`--arch`) with random weights and a real BPE vocabulary'
            cand quantize 'Re-quantize a model''s weight matrices (norms stay f32)'
            cand tokenize 'Print the token ids of a text as the model''s tokenizer splits it (`--json`: the ids and each token''s text)'
        }
        &'swactor;help;model;inspect'= {
        }
        &'swactor;help;model;synth'= {
        }
        &'swactor;help;model;quantize'= {
        }
        &'swactor;help;model;tokenize'= {
        }
        &'swactor;help;node'= {
            cand id 'Print this node''s identity (endpoint id) from its key file, creating the key (0600) on first use. The endpoint id is what pool files name'
            cand boot 'Boot this host as a pool node (identity, arena, worker, iroh endpoint, SWIM, control inbox, admin socket) and serve until SIGINT or SIGTERM'
        }
        &'swactor;help;node;id'= {
        }
        &'swactor;help;node;boot'= {
        }
        &'swactor;help;edge'= {
            cand inspect 'Show a node''s edge records (state, ring, peers) and what it sees of the pool'
        }
        &'swactor;help;edge;inspect'= {
        }
        &'swactor;help;cache'= {
            cand ls 'List the downloaded weights: file, kind (whole or a stage''s ranges), size, URL, sha256'
            cand clear 'Remove the downloaded weights (only the cache''s own files in the directory)'
        }
        &'swactor;help;cache;ls'= {
        }
        &'swactor;help;cache;clear'= {
        }
        &'swactor;help;pool'= {
            cand watch 'Observe a pool read-only: connect to every node of a pool file with the orchestrator''s delegation (never as the orchestrator), and report availability, liveness as the nodes'' SWIM sees it, and pool readiness (ready = every node available, live and unchanged for the convergence window). Safe beside a run'
            cand init 'Write a pool file from what the nodes printed: the `node_available` lines of `node boot --json` (from files, or standard input), so nobody copies endpoint ids by hand. Each node''s reported memory becomes its `memory_bytes` (left out when it reported none: `orchestrate pool` then takes the node''s report); the pool is checked as `run plan` checks a pool file'
        }
        &'swactor;help;pool;watch'= {
        }
        &'swactor;help;pool;init'= {
        }
        &'swactor;help;relay'= {
            cand serve 'Serve an iroh relay for the pool''s hosts behind NAT (nodes and orchestrators name it with `--relay URL`), until SIGINT or SIGTERM. Plain HTTP without a certificate (tests, trusted networks), HTTPS with `--cert` and `--key`'
        }
        &'swactor;help;relay;serve'= {
        }
        &'swactor;help;chat'= {
        }
        &'swactor;help;complete'= {
        }
        &'swactor;help;bench'= {
            cand ring 'Cross-process ring throughput (node producer -> ingress ring -> a real worker''s device copy) as a ratio of plain memcpy bandwidth measured in the same run'
            cand wake 'Wake round trip: a small object written into an ingress ring until the worker''s `ObjectLoaded` line is read back (median and p99)'
            cand edge 'Edge throughput (egress ring -> send pump -> QUIC -> receive pump -> ingress ring) beside raw iroh stream throughput, and the hop latency of a decode-sized object'
            cand decode 'Decode tokens/s of `swactor generate` at one compute thread: the whole model against the same model split into in-process stages, for the model and re-quantized copies of it'
            cand pipeline 'Decode tokens/s of a `run local` pipeline (one node process per stage, one compute thread each) against `swactor generate` at one thread, and the time from `run local`''s start to its first token'
            cand engine 'The CPU engine on one or more models (and re-quantized copies): decode and prefill tokens/s at each thread count, aggregate decode at several batch sizes, and stage load time (mapped, against candle''s copying load). `scripts/bench-llama-cpp.py` runs it beside llama.cpp'
            cand products 'The engine''s matrix products one at a time on a model''s own weights: time per product against the bytes it reads and this machine''s memory read bandwidth (measured in the same run), beside the whole forward pass, for a decode step and prefills'
            cand speculate 'Speculative decoding: one sequence''s decode tokens/s with and without n-gram drafts, in one process and through a `run local` pipeline, on a grounded workload (text the answer repeats or edits) and on free generation, each pair side by side'
            cand failover 'Fault detection: SIGKILLs a stage node of a local pipeline mid-decode and measures the time to `run_faulted` and to `run_torn_down`'
            cand serve 'Serving: a `run local` session with 1, 2, 4, 8 and 16 concurrent greedy requests (aggregate decode tokens/s, time to first token and inter-token latency p50 / p95) beside one-sequence `swactor generate` with the same total compute threads'
            cand prefix 'The prefix cache: a multi-turn conversation served by `run local --serve` (each turn a completion of the transcript so far), each turn sent with the cache and again with `cache_prompt: false` (time to first token, cached tokens per turn), then conversations sharing a long system prompt at once, with and without it (aggregate tokens/s)'
            cand structured 'Constrained output: the same chat prompts with a JSON schema in `response_format` and without, side by side in one server; decode tokens/s of each and their ratio, and how many constrained replies parsed with the schema''s keys'
            cand wan 'Wide-area links: a pipeline of node processes (one compute thread each), each host in its own network namespace behind a link of each round trip (`util wan-link`), and relay-only through a relay, with and without n-gram speculation; decode tokens/s and time to first token measured beside what the plan predicted, and their ratio. Needs root (network namespaces, iptables)'
        }
        &'swactor;help;bench;ring'= {
        }
        &'swactor;help;bench;wake'= {
        }
        &'swactor;help;bench;edge'= {
        }
        &'swactor;help;bench;decode'= {
        }
        &'swactor;help;bench;pipeline'= {
        }
        &'swactor;help;bench;engine'= {
        }
        &'swactor;help;bench;products'= {
        }
        &'swactor;help;bench;speculate'= {
        }
        &'swactor;help;bench;failover'= {
        }
        &'swactor;help;bench;serve'= {
        }
        &'swactor;help;bench;prefix'= {
        }
        &'swactor;help;bench;structured'= {
        }
        &'swactor;help;bench;wan'= {
        }
        &'swactor;help;help'= {
        }
    ]
    $completions[$command]
}
