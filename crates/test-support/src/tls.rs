//! A local HTTPS file server for tests that download file parts: a certificate authority made
//! for the test (its certificate written to a PEM file the server under test is told to trust)
//! and a leaf certificate for `127.0.0.1` and `localhost` signed by it, served with rustls.
//!
//! It answers `GET <path>` with the bytes added for that path (and their Content-Type), 404
//! otherwise, and counts the requests.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

type Files = HashMap<String, (String, Vec<u8>)>;

/// A running HTTPS file server; stops when dropped.
pub struct TlsFiles {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The test CA's certificate, PEM.
    pub ca_pem: String,
    ca_file: PathBuf,
    _dir: tempfile::TempDir,
    files: Arc<Mutex<Files>>,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsFiles {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsFiles {
    /// Starts on an ephemeral port of 127.0.0.1 with a fresh CA.
    pub async fn start() -> TlsFiles {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "volcanic test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().unwrap();
        let leaf_params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();

        let config = ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(leaf.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
            )
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address: SocketAddr = listener.local_addr().unwrap();

        let dir = tempfile::tempdir().unwrap();
        let ca_pem = ca_cert.pem();
        let ca_file = dir.path().join("test-ca.pem");
        std::fs::write(&ca_file, &ca_pem).unwrap();

        let files: Arc<Mutex<Files>> = Arc::default();
        let requests = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(serve(listener, acceptor, files.clone(), requests.clone()));
        TlsFiles {
            url: format!("https://{address}"),
            ca_pem,
            ca_file,
            _dir: dir,
            files,
            requests,
            task,
        }
    }

    /// Serves `bytes` at `path` (starting with `/`) with `content_type`.
    pub fn add(&self, path: &str, content_type: &str, bytes: &[u8]) {
        self.files
            .lock()
            .unwrap()
            .insert(path.to_string(), (content_type.to_string(), bytes.to_vec()));
    }

    /// The file holding the CA's certificate, to trust.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// How many requests were answered (TLS handshakes that failed never get here).
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    files: Arc<Mutex<Files>>,
    requests: Arc<AtomicUsize>,
) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        let (acceptor, files, requests) = (acceptor.clone(), files.clone(), requests.clone());
        tokio::spawn(async move {
            // A client that does not trust the CA ends here.
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                requests.fetch_add(1, Ordering::SeqCst);
                let found = files.lock().unwrap().get(request.uri().path()).cloned();
                async move {
                    let response = match found {
                        Some((content_type, bytes)) => Response::builder()
                            .header("content-type", content_type)
                            .body(Full::new(Bytes::from(bytes))),
                        None => Response::builder()
                            .status(StatusCode::NOT_FOUND)
                            .body(Full::new(Bytes::new())),
                    };
                    Ok::<_, std::convert::Infallible>(response.unwrap())
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}
