//! List paging: `?limit=` (1..=200, default 50) and an opaque `?cursor=`
//! that encodes the sort key of the last item returned.

use std::collections::HashMap;

use actix_web::HttpRequest;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

use crate::domain::error::ApiError;

/// Default page size.
pub const DEFAULT_LIMIT: usize = 50;
/// Largest page size.
pub const MAX_LIMIT: usize = 200;

/// `{"items": [...], "next_cursor": string|null}`.
#[derive(Serialize, ToSchema)]
pub struct Page<T: ToSchema> {
    /// This page's items.
    pub items: Vec<T>,
    /// Pass as `?cursor=` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// The document's `?limit=&cursor=` of lists ordered by record id
/// (workspace resources, the audit log, the delivery log): the cursor is
/// the base64url (unpadded) of a 16-byte id, as [`ListQuery::cursor_id`] reads it.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct IdPaging {
    /// Page size, 1..=200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[param(pattern = r"^[A-Za-z0-9_-]{21}[AQgw]$")]
    cursor: Option<String>,
}

/// The document's `?limit=&cursor=` of lists ordered by another key (roles,
/// members): the cursor is the base64url (unpadded) of 1..=512 bytes, as
/// `decode_cursor` reads it (the pattern spells out canonical unpadded base64url).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct KeyPaging {
    /// Page size, 1..=200 (default 50; the role list: every role).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[param(
        min_length = 2,
        max_length = 683,
        pattern = r"^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-][AQgw]|[A-Za-z0-9_-]{2}[AEIMQUYcgkosw048])?$"
    )]
    cursor: Option<String>,
}

/// Parsed query parameters of a list request.
pub struct ListQuery {
    /// `?limit=`, if given.
    pub limit: Option<usize>,
    /// The decoded `?cursor=`, if given.
    pub cursor: Option<Vec<u8>>,
    /// Other parameters (filters).
    pub filters: HashMap<String, String>,
}

impl ListQuery {
    /// Parses the query string: 400 on a bad limit or cursor.
    pub fn parse(req: &HttpRequest) -> Result<Self, ApiError> {
        let mut filters: HashMap<String, String> = serde_urlencoded_pairs(req.query_string())
            .map_err(|_| ApiError::malformed("the query string is malformed"))?;
        let limit = match filters.remove("limit") {
            None => None,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=MAX_LIMIT).contains(&n) => Some(n),
                _ => {
                    return Err(ApiError::invalid(
                        "limit",
                        format!("must be an integer from 1 to {MAX_LIMIT}"),
                    ))
                }
            },
        };
        let cursor = match filters.remove("cursor") {
            None => None,
            Some(text) => Some(decode_cursor(&text)?),
        };
        Ok(ListQuery {
            limit,
            cursor,
            filters,
        })
    }

    /// The cursor as a record id (for time-ordered logs): 400 when it is not one.
    pub fn cursor_id<T>(&self, parse: fn(&[u8]) -> Option<T>) -> Result<Option<T>, ApiError> {
        match &self.cursor {
            None => Ok(None),
            Some(bytes) if bytes.len() == 16 => parse(bytes)
                .map(Some)
                .ok_or_else(|| ApiError::invalid("cursor", "is not a cursor this API returned")),
            Some(_) => Err(ApiError::invalid(
                "cursor",
                "is not a cursor this API returned",
            )),
        }
    }

    /// The page size, defaulting to [`DEFAULT_LIMIT`].
    pub fn limit_or_default(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT)
    }
}

fn serde_urlencoded_pairs(query: &str) -> Result<HashMap<String, String>, ()> {
    actix_web::web::Query::<HashMap<String, String>>::from_query(query)
        .map(|q| q.into_inner())
        .map_err(|_| ())
}

/// Encodes a sort key as a cursor.
pub fn encode_cursor(key: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(key)
}

impl<T: ToSchema> Page<T> {
    /// The answer for a newest-first page the store read: each record shown
    /// with `view`; the cursor, when more remain, is the last record's id
    /// (`id_of`), or, when a filtered page stopped at its scan bound, the
    /// last record it examined.
    pub fn of_records<R>(
        page: crate::storage::Page<R>,
        id_of: impl Fn(&R) -> [u8; 16],
        view: impl Fn(R) -> T,
    ) -> Self {
        let next_cursor = match (page.more, page.items.last(), page.scanned_to) {
            (true, Some(last), _) => Some(encode_cursor(&id_of(last))),
            (_, _, Some(scanned_to)) => Some(encode_cursor(&scanned_to)),
            _ => None,
        };
        Page {
            items: page.items.into_iter().map(view).collect(),
            next_cursor,
        }
    }
}

fn decode_cursor(text: &str) -> Result<Vec<u8>, ApiError> {
    match URL_SAFE_NO_PAD.decode(text) {
        Ok(bytes) if !bytes.is_empty() && bytes.len() <= 512 => Ok(bytes),
        _ => Err(ApiError::invalid(
            "cursor",
            "is not a cursor this API returned",
        )),
    }
}

/// Pages items sorted ascending by key: those after the cursor, at most `limit`.
pub fn paginate<T: ToSchema>(
    items: impl Iterator<Item = (Vec<u8>, T)>,
    cursor: Option<&[u8]>,
    limit: usize,
) -> Page<T> {
    let mut page = Vec::new();
    let mut last_key = None;
    let mut more = false;
    for (key, item) in items.filter(|(key, _)| cursor.is_none_or(|c| key.as_slice() > c)) {
        if page.len() == limit {
            more = true;
            break;
        }
        last_key = Some(key);
        page.push(item);
    }
    let next_cursor = if more {
        last_key.map(|k| encode_cursor(&k))
    } else {
        None
    };
    Page {
        items: page,
        next_cursor,
    }
}
