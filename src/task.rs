//! Spawning the agent's tasks on its one thread.
//!
//! Owns: [`spawn_local`], the one way picolet's code starts a `!Send` task. Must never:
//! import another module of picolet.
//!
//! tokio instantiates its whole task machinery (the task cell, its poll, completion,
//! cancellation and join-handle code, about 650 bytes of aarch64 code) once per future
//! type spawned. picolet spawns some thirty kinds of task; boxed here behind one
//! `dyn Future` per output type they share a single copy. The price is one small
//! allocation per spawn, which is nothing beside the task's own.

use std::future::Future;
use std::pin::Pin;

use tokio::task::JoinHandle;

/// `tokio::task::spawn_local` with the future boxed (see the module docs).
pub fn spawn_local<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let boxed: Pin<Box<dyn Future<Output = F::Output>>> = Box::pin(future);
    tokio::task::spawn_local(boxed)
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    #[tokio::test(flavor = "current_thread")]
    async fn a_boxed_task_runs_and_gives_its_output() {
        let local = tokio::task::LocalSet::new();
        let shared = Rc::new(41); // !Send: the task must run on this thread
        let out = local
            .run_until(async move { super::spawn_local(async move { *shared + 1 }).await })
            .await;
        assert_eq!(out.unwrap(), 42);
    }
}
