//! TLS for QUIC: the learner's certificate (loaded, or generated once and
//! stored), and how actors trust it (a CA file or a SHA-256 pin).

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read `{path}`: {message}")]
    Read { path: PathBuf, message: String },
    #[error("cannot write `{path}`: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{0}` holds no certificate")]
    NoCertificate(PathBuf),
    #[error("cannot generate a certificate: {0}")]
    Generate(String),
    #[error("TLS configuration: {0}")]
    Config(String),
    #[error("pin `{0}` is not a SHA-256 fingerprint (64 hex digits, ':' allowed)")]
    BadPin(String),
    #[error("cannot bind UDP {0}: {1}")]
    Bind(std::net::SocketAddr, std::io::Error),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Lower-case hex SHA-256 of a certificate's DER bytes.
pub fn fingerprint(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The learner's certificate chain and key.
#[derive(Debug)]
pub struct ServerIdentity {
    pub certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    /// SHA-256 of the end-entity certificate (what actors pin).
    pub fingerprint: String,
    /// Where the certificate is, for actors that trust a CA file.
    pub cert_path: PathBuf,
}

impl ServerIdentity {
    /// Loads a PEM certificate chain and a PEM private key.
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<ServerIdentity, TlsError> {
        let read_err = |path: &Path, e: &dyn std::fmt::Display| TlsError::Read {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let certs = CertificateDer::pem_file_iter(cert_path)
            .map_err(|e| read_err(cert_path, &e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| read_err(cert_path, &e))?;
        let first = certs
            .first()
            .ok_or_else(|| TlsError::NoCertificate(cert_path.to_path_buf()))?;
        let fingerprint = fingerprint(first);
        let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| read_err(key_path, &e))?;
        Ok(ServerIdentity {
            certs,
            key,
            fingerprint,
            cert_path: cert_path.to_path_buf(),
        })
    }

    /// Loads `dir/cert.pem` and `dir/key.pem`, generating a self-signed pair
    /// for `localhost`, 127.0.0.1, ::1 and `extra_names` on first use.
    pub fn load_or_generate(
        dir: &Path,
        extra_names: &[String],
    ) -> Result<ServerIdentity, TlsError> {
        let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
        if !cert_path.exists() || !key_path.exists() {
            let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
            names.extend(extra_names.iter().cloned());
            let ck = rcgen::generate_simple_self_signed(names)
                .map_err(|e| TlsError::Generate(e.to_string()))?;
            let write = |path: &Path, text: String| -> Result<(), TlsError> {
                std::fs::create_dir_all(dir)
                    .and_then(|_| std::fs::write(path, text))
                    .map_err(|source| TlsError::Write {
                        path: path.to_path_buf(),
                        source,
                    })
            };
            write(&key_path, ck.key_pair.serialize_pem())?;
            set_private(&key_path);
            write(&cert_path, ck.cert.pem())?;
            tracing::info!("generated a self-signed certificate in {}", dir.display());
        }
        Self::load(&cert_path, &key_path)
    }

    pub(super) fn rustls_server_config(&self) -> Result<rustls::ServerConfig, TlsError> {
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(self.certs.clone(), self.key.clone_key())
            .map_err(|e| TlsError::Config(e.to_string()))?;
        cfg.alpn_protocols = vec![crate::ALPN.to_vec()];
        Ok(cfg)
    }
}

/// Owner-only permissions on a key file.
fn set_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
}

/// How an actor decides the learner is who it says.
#[derive(Debug, Clone)]
pub enum Trust {
    /// PEM certificates of the CAs (or the learner's self-signed cert).
    CaFile(PathBuf),
    /// SHA-256 of the learner's certificate, hex (':' separators allowed).
    Pin(String),
}

impl Trust {
    pub(super) fn rustls_client_config(&self) -> Result<rustls::ClientConfig, TlsError> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let mut cfg = match self {
            Trust::CaFile(path) => {
                let mut roots = rustls::RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| TlsError::Read {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                if certs.is_empty() {
                    return Err(TlsError::NoCertificate(path.clone()));
                }
                for c in certs {
                    roots
                        .add(c)
                        .map_err(|e| TlsError::Config(format!("{}: {e}", path.display())))?;
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            Trust::Pin(pin) => {
                let want: String = pin.chars().filter(|&c| c != ':').collect::<String>();
                let want = want.to_ascii_lowercase();
                if want.len() != 64 || !want.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(TlsError::BadPin(pin.clone()));
                }
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(PinVerifier {
                        want,
                        provider: provider(),
                    }))
                    .with_no_client_auth()
            }
        };
        cfg.alpn_protocols = vec![crate::ALPN.to_vec()];
        Ok(cfg)
    }
}

/// Accepts exactly the certificate whose SHA-256 is pinned (still checks
/// the handshake signature with that certificate's key).
#[derive(Debug)]
struct PinVerifier {
    want: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got = fingerprint(end_entity);
        if got == self.want {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "certificate fingerprint {got} is not the pinned {}",
                self.want
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
