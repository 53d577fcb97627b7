//! Reading files over HTTP with `fetch`: byte ranges with retries and deadlines, or whole bodies.

use super::*;

/// Reads byte ranges of a URL with `fetch` and a `Range` header. Cross-origin servers must allow
/// the `Range` request header and expose `Content-Range` (CORS).
pub(crate) struct FetchReader {
    pub(crate) url: String,
    pub(crate) options: HttpOptions,
}

/// Why one fetch failed: whether a retry may help, and the error.
pub(crate) struct Attempt {
    pub(crate) retry: bool,
    pub(crate) error: edo::Error,
}

impl FetchReader {
    pub(crate) fn new(url: String) -> FetchReader {
        FetchReader { url, options: HttpOptions::default() }
    }

    fn js(&self, what: &str, e: JsValue) -> edo::Error {
        edo::Error::Remote { location: self.url.clone(), message: format!("{what}: {}", e.as_string().unwrap_or_else(|| format!("{e:?}"))) }
    }

    /// One fetch of `range`, aborted after `timeout_ms` (`AbortSignal.timeout`, which covers
    /// the body too).
    async fn attempt(&self, range: &std::ops::Range<u64>, timeout_ms: u32) -> Result<(Vec<u8>, u64), Attempt> {
        use wasm_bindgen::JsCast;
        use wasm_bindgen_futures::JsFuture;
        let fatal = |error| Attempt { retry: false, error };
        let headers = web_sys::Headers::new().map_err(|e| fatal(self.js("headers", e)))?;
        headers.set("Range", &range_header(range)).map_err(|e| fatal(self.js("headers", e)))?;
        let init = web_sys::RequestInit::new();
        init.set_method("GET");
        init.set_headers(&headers);
        init.set_signal(Some(&web_sys::AbortSignal::timeout_with_u32(timeout_ms)));
        let request = web_sys::Request::new_with_str_and_init(&self.url, &init).map_err(|e| fatal(self.js("request", e)))?;
        let promise = match web_sys::window() {
            Some(w) => w.fetch_with_request(&request),
            None => js_sys::global().unchecked_into::<web_sys::WorkerGlobalScope>().fetch_with_request(&request),
        };
        // fetch rejects on a network failure or the timeout: both worth a retry.
        let response: web_sys::Response = JsFuture::from(promise).await.map_err(|e| Attempt { retry: true, error: self.js("fetch", e) })?.unchecked_into();
        let status = response.status();
        let content_range = response.headers().get("content-range").ok().flatten();
        let (len, total) = range_reply(&self.url, range, status, content_range.as_deref())
            .map_err(|error| Attempt { retry: matches!(status, 429 | 502 | 503 | 504), error })?;
        if len == 0 {
            return Ok((Vec::new(), total));
        }
        let body = response.array_buffer().map_err(|e| fatal(self.js("body", e)))?;
        let buffer = JsFuture::from(body).await.map_err(|e| Attempt { retry: true, error: self.js("body", e) })?;
        let mut bytes = js_sys::Uint8Array::new(&buffer).to_vec();
        if (bytes.len() as u64) < len {
            return Err(Attempt { retry: true, error: self.js("body", format!("cut short: {} of {len} bytes from {}", bytes.len(), range.start).into()) });
        }
        bytes.truncate((range.end - range.start) as usize);
        Ok((bytes, total))
    }
}

/// Resolves after `ms` milliseconds (a timer of the window or the worker).
pub(crate) async fn sleep_ms(ms: u32) {
    use wasm_bindgen::JsCast;
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let _ = match web_sys::window() {
            Some(w) => w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms as i32),
            None => js_sys::global().unchecked_into::<web_sys::WorkerGlobalScope>().set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms as i32),
        };
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

impl RangeReader for FetchReader {
    async fn read(&self, range: std::ops::Range<u64>) -> Result<(Vec<u8>, u64), edo::Error> {
        self.read_by(range, None).await
    }

    /// Retries as `HttpReader` does natively (`HttpOptions`: what is safe to retry, with
    /// doubling waits), each fetch aborted at the request timeout or the call's deadline.
    async fn read_by(&self, range: std::ops::Range<u64>, deadline: Option<web_time::Instant>) -> Result<(Vec<u8>, u64), edo::Error> {
        let left = || deadline.map(|d| d.saturating_duration_since(web_time::Instant::now()));
        let mut wait = self.options.backoff;
        let mut tries = 0;
        loop {
            let timeout = left().map_or(self.options.request_timeout, |l| l.min(self.options.request_timeout));
            if timeout.is_zero() {
                return Err(edo::Error::Remote { location: self.url.clone(), message: "the call's deadline passed (RemoteLimits::deadline)".into() });
            }
            let result = self.attempt(&range, timeout.as_millis().clamp(1, u32::MAX as u128) as u32).await;
            if result.is_err() && left().is_some_and(|l| l.is_zero()) {
                return Err(edo::Error::Remote {
                    location: self.url.clone(),
                    message: format!("the call's deadline passed (RemoteLimits::deadline) while bytes {}..{} were on their way", range.start, range.end),
                });
            }
            match result {
                Ok(r) => return Ok(r),
                Err(Attempt { retry: true, .. }) if tries < self.options.retries && left().is_none_or(|l| l > wait) => {
                    tries += 1;
                    sleep_ms(wait.as_millis().min(u32::MAX as u128) as u32).await;
                    wait = wait.saturating_mul(2);
                }
                Err(Attempt { error: edo::Error::Remote { location, message }, .. }) if tries > 0 => {
                    return Err(edo::Error::Remote { location, message: format!("{message} (after {tries} retr{})", if tries == 1 { "y" } else { "ies" }) });
                }
                Err(Attempt { error, .. }) => return Err(error),
            }
        }
    }

    fn name(&self) -> String {
        self.url.clone()
    }
}

/// The whole body of `url` (`fetch`, no range).
pub(crate) async fn fetch_all(url: &str) -> Result<Vec<u8>, edo::Error> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    let fail = |what: &str, e: JsValue| edo::Error::Remote {
        location: url.to_string(),
        message: format!("{what}: {}", e.as_string().unwrap_or_else(|| format!("{e:?}"))),
    };
    let promise = match web_sys::window() {
        Some(w) => w.fetch_with_str(url),
        None => js_sys::global().unchecked_into::<web_sys::WorkerGlobalScope>().fetch_with_str(url),
    };
    let response: web_sys::Response = JsFuture::from(promise).await.map_err(|e| fail("fetch", e))?.unchecked_into();
    if !response.ok() {
        return Err(edo::Error::Remote { location: url.to_string(), message: format!("HTTP {} {}", response.status(), response.status_text()) });
    }
    let buffer = JsFuture::from(response.array_buffer().map_err(|e| fail("body", e))?).await.map_err(|e| fail("body", e))?;
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}
