//! A single-value channel whose receiver is a future: how a wgpu callback (buffer mapping) hands
//! its result to async code on native and in the browser alike.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<T>,
    closed: bool,
    waker: Option<Waker>,
}

pub struct Sender<T>(Arc<Mutex<Slot<T>>>);
pub struct Receiver<T>(Arc<Mutex<Slot<T>>>);

pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Mutex::new(Slot { value: None, closed: false, waker: None }));
    (Sender(slot.clone()), Receiver(slot))
}

impl<T> Sender<T> {
    pub fn send(self, value: T) {
        if let Ok(mut s) = self.0.lock() {
            s.value = Some(value);
        }
        // Drop wakes the receiver.
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.0.lock() {
            s.closed = true;
            if let Some(w) = s.waker.take() {
                w.wake();
            }
        }
    }
}

impl<T> Future for Receiver<T> {
    /// `None` when the sender was dropped without sending.
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let Ok(mut s) = self.0.lock() else { return Poll::Ready(None) };
        if let Some(v) = s.value.take() {
            return Poll::Ready(Some(v));
        }
        if s.closed {
            return Poll::Ready(None);
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
