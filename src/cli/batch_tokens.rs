//! A batch job's prompts, tokenized off the session's path: each request joins the
//! session as soon as its prompt is tokenized. Prompts shorter than
//! [`LARGE_PROMPT_BYTES`] are tokenized in file order on one thread; longer ones on
//! [`WORKERS`] threads beside it, so a slow prompt never holds the others back.

use std::sync::{Arc, Mutex, mpsc as std_mpsc};

use tokio::sync::mpsc;

use super::requests::Pending;
use crate::orchestrator::driver::Arriving;
use crate::orchestrator::requests::Request;

/// Prompts this long (bytes) or longer are tokenized beside the others.
pub const LARGE_PROMPT_BYTES: usize = 16 << 10;
/// Threads that tokenize long prompts.
pub const WORKERS: usize = 2;

/// Turns a pending request's prompt into token ids.
pub type Encode = Arc<dyn Fn(&Pending) -> Vec<u32> + Send + Sync>;

type Sender = mpsc::UnboundedSender<(usize, Request)>;

/// Starts tokenizing `pending` (request `i` is `pending[i]`): each request is sent as soon
/// as it is ready; the channel closes once every one was sent (or its receiver is gone).
pub fn spawn(pending: Vec<Pending>, encode: Encode) -> Arriving {
    let ids = pending.iter().map(Pending::display_id).collect();
    let (tx, rx) = mpsc::unbounded_channel();
    let (large_tx, large_rx) = std_mpsc::channel::<(usize, Pending)>();
    let large_rx = Arc::new(Mutex::new(large_rx));
    for n in 0..WORKERS {
        let (tx, encode, large_rx) = (tx.clone(), encode.clone(), large_rx.clone());
        let work = move || {
            loop {
                let next = large_rx.lock().ok().and_then(|rx| rx.recv().ok());
                let Some((index, p)) = next else { return };
                if !send(&tx, &encode, index, p) {
                    return;
                }
            }
        };
        start(format!("tokenize-{n}"), work);
    }
    start("tokenize".into(), move || {
        for (index, p) in pending.into_iter().enumerate() {
            if p.text.len() >= LARGE_PROMPT_BYTES {
                let _ = large_tx.send((index, p));
            } else if !send(&tx, &encode, index, p) {
                return;
            }
        }
    });
    Arriving::Batch { ids, requests: rx }
}

/// Runs `work` on a thread of its own (on this one if no thread can be started).
fn start(name: String, work: impl FnOnce() + Send + 'static) {
    let work = Arc::new(Mutex::new(Some(work)));
    let theirs = work.clone();
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        if let Some(w) = theirs.lock().ok().and_then(|mut w| w.take()) {
            w();
        }
    });
    if spawned.is_err()
        && let Some(w) = work.lock().ok().and_then(|mut w| w.take())
    {
        w();
    }
}

/// Tokenizes `p` and sends it as request `index`; false once nobody listens.
fn send(tx: &Sender, encode: &Encode, index: usize, p: Pending) -> bool {
    let request = Request {
        id: p.display_id(),
        prompt: encode(&p),
        max_tokens: p.max_tokens,
        sampling: p.sampling,
        stop: p.stop,
        logprobs: None,
        speculative: p.speculative,
        cache_prompt: p.cache_prompt,
        constraint: None,
    };
    tx.send((index, request)).is_ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cli::requests::text_id;
    use crate::wire::SamplingPolicy;

    fn pending(id: &str, text: String) -> Pending {
        Pending {
            id: text_id(id),
            text,
            messages: None,
            max_tokens: 1,
            sampling: SamplingPolicy::Greedy,
            stop: Vec::new(),
            speculative: true,
            cache_prompt: true,
        }
    }

    #[test]
    fn requests_that_are_ready_arrive_while_a_slow_prompt_is_still_being_tokenized() {
        // The long prompt's tokenizing ends only once the short one arrived (or after
        // 20 s, when tokenizing runs one prompt after another).
        let (arrived_tx, arrived_rx) = std_mpsc::channel::<()>();
        let arrived_rx = Mutex::new(arrived_rx);
        let encode: Encode = Arc::new(move |p: &Pending| {
            let text = &p.text;
            if text.len() >= LARGE_PROMPT_BYTES {
                let _ = arrived_rx.lock().map(|rx| rx.recv_timeout(Duration::from_secs(20)));
            }
            vec![text.len() as u32]
        });
        let long = "x".repeat(LARGE_PROMPT_BYTES);
        let arriving = spawn(vec![pending("slow", long), pending("quick", "hi".into())], encode);
        let Arriving::Batch { ids, requests: mut arriving } = arriving else {
            panic!("a batch job's requests arrive as a batch")
        };
        assert_eq!(ids, ["slow", "quick"]);
        let first = arriving.blocking_recv().expect("a request");
        assert_eq!(
            (first.0, first.1.id.as_str(), first.1.prompt.as_slice()),
            (1, "quick", &[2][..])
        );
        arrived_tx.send(()).expect("the slow one waits");
        let second = arriving.blocking_recv().expect("the slow one");
        assert_eq!(second.0, 0);
        assert!(arriving.blocking_recv().is_none(), "closed once all were sent");
    }
}
