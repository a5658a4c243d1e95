//! Tenants and tokens. A token is known only by its SHA-256; it belongs to one tenant and
//! has one role. Every request is checked on exactly what it touches: its tenant's tables
//! only, and what its role allows.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::ServerConfig;
use crate::error::{Error, Result};

/// What a token may do; each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Read,
    Write,
    Admin,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        })
    }
}

/// A tenant: its tables live under `prefix` in the warehouse (the whole warehouse if none).
#[derive(Debug)]
pub struct Tenant {
    pub name: String,
    pub prefix: Option<String>,
}

/// Who a request is.
#[derive(Debug, Clone)]
pub struct Caller {
    pub tenant: Arc<Tenant>,
    pub role: Role,
}

impl Caller {
    /// Refuse unless the caller's role is at least `needed`.
    pub fn require(&self, needed: Role, action: &str) -> Result<()> {
        if self.role >= needed {
            Ok(())
        } else {
            Err(Error::Forbidden {
                role: self.role.to_string(),
                action: action.to_string(),
            })
        }
    }
}

/// The token table, by hash.
#[derive(Debug)]
pub struct Auth {
    tokens: HashMap<[u8; 32], Caller>,
    /// No tenants and no token: every request is the single tenant's admin (loopback only,
    /// enforced by [`ServerConfig::validate`]).
    open: Option<Caller>,
}

/// The hex SHA-256 of a token, as the config stores it.
pub fn hash_token(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn parse_hex(h: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(h.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl Auth {
    pub fn new(config: &ServerConfig) -> Result<Self> {
        let mut tokens = HashMap::new();
        if config.tenants.is_empty() {
            let tenant = Arc::new(Tenant {
                name: "default".into(),
                prefix: None,
            });
            let caller = Caller {
                tenant,
                role: Role::Admin,
            };
            return Ok(match &config.admin_token {
                Some(t) => {
                    tokens.insert(digest(t.expose()), caller);
                    Self { tokens, open: None }
                }
                None => Self {
                    tokens,
                    open: Some(caller),
                },
            });
        }
        for t in &config.tenants {
            let tenant = Arc::new(Tenant {
                name: t.name.clone(),
                prefix: Some(t.prefix.clone().unwrap_or_else(|| t.name.clone())),
            });
            for k in &t.tokens {
                let hash = parse_hex(&k.sha256.to_ascii_lowercase()).ok_or_else(|| {
                    Error::InvalidConfig {
                        reason: format!("tenant '{}': bad token hash", t.name),
                    }
                })?;
                let caller = Caller {
                    tenant: tenant.clone(),
                    role: k.role,
                };
                if tokens.insert(hash, caller).is_some() {
                    return Err(Error::InvalidConfig {
                        reason: format!("tenant '{}': a token is listed twice", t.name),
                    });
                }
            }
        }
        Ok(Self { tokens, open: None })
    }

    /// The tokens of `new`, a config file read again by a server started with `current`:
    /// refused when `new` would not start a server, has no tenants, or changes them.
    pub fn reloaded(current: &ServerConfig, new: &ServerConfig) -> Result<Self> {
        let folders = |c: &ServerConfig| {
            let mut f: Vec<(String, String)> = c
                .tenants
                .iter()
                .map(|t| {
                    (
                        t.name.clone(),
                        t.prefix.clone().unwrap_or_else(|| t.name.clone()),
                    )
                })
                .collect();
            f.sort();
            f
        };
        if current.tenants.is_empty() {
            return Err(Error::InvalidConfig {
                reason: "no tenants: the admin token comes from --token (or NEVE_TOKEN) and changes with a restart".into(),
            });
        }
        if folders(new) != folders(current) {
            return Err(Error::InvalidConfig {
                reason: "the tenants (names or prefixes) changed: that needs a restart; the tokens in force are kept".into(),
            });
        }
        new.validate()?;
        Self::new(new)
    }

    /// Tokens known.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The caller of a request: `Authorization: Bearer T` (or `Token T`, as InfluxDB clients
    /// send it), or `token` given by the caller from elsewhere (InfluxDB v1's `p=` parameter).
    pub fn caller(&self, headers: &HeaderMap, token: Option<&str>) -> Result<Caller> {
        let from_header = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                // The scheme is case-insensitive (RFC 9110), and spaces or tabs follow it.
                let (scheme, rest) = v.split_once([' ', '\t'])?;
                (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token"))
                    .then(|| rest.trim_matches([' ', '\t']))
            });
        let caller = match from_header.or(token) {
            Some(t) => self
                .tokens
                .get(&digest(t))
                .cloned()
                .ok_or(Error::Unauthorized),
            None => self.open.clone().ok_or(Error::Unauthorized),
        }?;
        // The request's (or Flight call's) span says whose it was, for its `answered` line.
        tracing::Span::current().record("tenant", caller.tenant.name.as_str());
        Ok(caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{TenantConfig, TokenConfig};

    #[test]
    fn tokens_map_to_their_tenant_and_role() {
        let config = ServerConfig {
            tenants: vec![
                TenantConfig {
                    name: "a".into(),
                    prefix: None,
                    tokens: vec![TokenConfig {
                        sha256: hash_token("ta"),
                        role: Role::Write,
                    }],
                    access_keys: Vec::new(),
                },
                TenantConfig {
                    name: "b".into(),
                    prefix: Some("bee".into()),
                    tokens: vec![TokenConfig {
                        sha256: hash_token("tb").to_uppercase(),
                        role: Role::Read,
                    }],
                    access_keys: Vec::new(),
                },
            ],
            ..Default::default()
        };
        let auth = Auth::new(&config).unwrap();
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert("authorization", v.parse().unwrap());
            m
        };
        let a = auth.caller(&h("Bearer ta"), None).unwrap();
        assert_eq!((a.tenant.name.as_str(), a.role), ("a", Role::Write));
        assert!(a.require(Role::Write, "insert").is_ok());
        assert!(matches!(
            a.require(Role::Admin, "create tables"),
            Err(Error::Forbidden { .. })
        ));
        // The scheme in any case, then spaces or a tab.
        for v in ["bearer ta", "BEARER\tta", "Bearer   ta"] {
            assert_eq!(auth.caller(&h(v), None).unwrap().tenant.name, "a", "{v}");
        }
        assert!(auth.caller(&h("Bearerta"), None).is_err());
        assert!(auth.caller(&h("Basic ta"), None).is_err());
        let b = auth.caller(&h("Token tb"), None).unwrap();
        assert_eq!(b.tenant.prefix.as_deref(), Some("bee"));
        assert!(matches!(
            auth.caller(&h("Bearer nope"), None),
            Err(Error::Unauthorized)
        ));
        assert!(matches!(
            auth.caller(&HeaderMap::new(), None),
            Err(Error::Unauthorized)
        ));
        assert_eq!(
            auth.caller(&HeaderMap::new(), Some("tb")).unwrap().role,
            Role::Read
        );
        assert_eq!(
            hash_token("test"),
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
    }
}
