//! The protobuf codec of the gRPC clients and servers generated from `proto/` (the CRI,
//! the gRPC health probe, the CSI plugin registration): tonic-prost's codec with a 1 KiB
//! first buffer per call instead of tonic's 8 KiB (`build.rs` names it as `codec_path`).
//!
//! tonic allocates that buffer for every call it encodes and every response it decodes,
//! whatever the message's size, and a buffer grows as a message needs. A CRI request is
//! mostly under 1 KiB (`StopContainer` is ~80 B, `CreateContainer` 1–2 kB), so 8 KiB per
//! call was the largest single allocation of a burst: 500 pods deleted at once held ~2.5 MB
//! of `StopContainer` encode buffers (heaptrack, `benches/picolet.rs fake-rss
//! --then-delete`). A larger message costs a few reallocations, nothing else.
//!
//! Also the one unix-socket channel every gRPC client dials through ([`unix_channel`]: the
//! CRI, the CSI plugins), and the one list of lint allows for the generated modules
//! ([`generated_module`]). A leaf: it imports nothing of picolet.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// Declares a module of generated prost/tonic code (its body `include!`s a file of
/// `OUT_DIR`, or it is a file that does) with the lint allows generated code needs, so the
/// list is written once: `crate::grpc::generated_module! { pub mod proto { include!(…); } }`.
/// Attributes before `mod` (docs, `cfg`) are kept.
macro_rules! generated_module {
    ($(#[$attr:meta])* $vis:vis mod $name:ident $($body:tt)*) => {
        $(#[$attr])*
        #[allow(
            missing_docs,
            unreachable_pub,
            unused_qualifications,
            clippy::all,
            clippy::pedantic,
            clippy::nursery,
            rustdoc::bare_urls,
            rustdoc::broken_intra_doc_links,
            rustdoc::invalid_html_tags
        )]
        $vis mod $name $($body)*
    };
}
pub(crate) use generated_module;

/// The first buffer of each encoded or decoded message.
const BUFFER_SIZE: usize = 1024;
/// When an encoding stream yields (tonic's default: 32 KiB).
const YIELD_THRESHOLD: usize = 32 * 1024;

fn settings() -> BufferSettings {
    BufferSettings::new(BUFFER_SIZE, YIELD_THRESHOLD)
}

/// tonic-prost's `ProstCodec`, with [`BUFFER_SIZE`] buffers.
#[derive(Debug, Clone)]
pub(crate) struct SmallBufferCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for SmallBufferCodec<T, U> {
    fn default() -> Self {
        SmallBufferCodec(PhantomData)
    }
}

impl<T, U> Codec for SmallBufferCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}

/// A lazy tonic channel over the unix socket `path`: dialled by the first call, and again by
/// the call after a broken connection. Every unix-socket gRPC client uses it (the CRI, the
/// CSI plugins): one connector type, one copy of the connection machinery in the binary.
///
/// # Panics
/// Outside a tokio runtime: the channel spawns its worker task on the current one.
pub(crate) fn unix_channel(path: Arc<Path>) -> Channel {
    // The URI is a placeholder (it becomes the :authority); the connector ignores it.
    Endpoint::from_static("http://localhost").connect_with_connector_lazy(tower::service_fn(
        move |_: Uri| {
            let path = Arc::clone(&path);
            async move {
                let stream = tokio::net::UnixStream::connect(&*path).await?;
                Ok::<_, std::io::Error>(TokioIo::new(stream))
            }
        },
    ))
}
