//! Any bytes as what a client sends on a node API connection after TLS: hyper's HTTP/1
//! request parser, the token check, the route, the query (selectors, log options, stream
//! parameters) and the answer, over the fake runtime with one pod served. It must never
//! panic, and (the run's -timeout and -rss_limit_mb) never take long or much memory. The
//! seeds carry the token, so the fuzzer starts past the authentication.
#![no_main]

use std::rc::Rc;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use picolet::{PodEvent, SystemClock, fakes::FakeRuntime, node_api::{Api, Token, View, serve_plain}};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The token in the seeds (`seeds/node_api/*`).
const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-node1","namespace":"default","uid":"u1","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"busybox"}]}}"#;

struct Fixture {
    rt: tokio::runtime::Runtime,
    api: Rc<Api<FakeRuntime, SystemClock>>,
}

thread_local! {
    static FIXTURE: Fixture = {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let view = View::new();
        let pod: picolet::api::Pod = serde_json::from_str(POD).unwrap();
        view.apply(
            vec![PodEvent::Pods { pods: vec![Arc::new(pod)], mirrors: vec![], sources_ready: true }],
            1_800_000_000_000_000_000,
        );
        let api = Api::new(
            Token::parse(TOKEN).unwrap(),
            view,
            FakeRuntime::new(SystemClock),
            SystemClock,
            Default::default(),
            Default::default(),
            std::env::temp_dir().join("picolet-fuzz-logs"),
        );
        Fixture { rt, api }
    };
}

fuzz_target!(|data: &[u8]| {
    FIXTURE.with(|f| {
        let local = tokio::task::LocalSet::new();
        local.block_on(&f.rt, async {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let shutdown = tokio_util::sync::CancellationToken::new();
            let serve = serve_plain(server, [127, 0, 0, 1].into(), Rc::clone(&f.api), shutdown.clone());
            let talk = async {
                let _ = client.write_all(data).await;
                let _ = client.shutdown().await;
                let mut sink = Vec::new();
                // A watch or a followed log never ends by itself: bounded by bytes and time.
                let _ = tokio::time::timeout(
                    std::time::Duration::from_millis(200),
                    (&mut client).take(1 << 20).read_to_end(&mut sink),
                )
                .await;
                shutdown.cancel();
            };
            let _ = tokio::join!(serve, talk);
        });
    });
});
