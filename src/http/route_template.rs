//! The matched route template of a request (`/organizations/{org_id}/roles`),
//! the label of its metrics and access line.
//!
//! actix finds it by matching the path against every pattern again, regexes
//! included: about 4 % of a role-list request. The template depends only on
//! the path's shape (the path with its id segments blanked, since no static
//! segment is an id), so each worker thread keeps the answers by shape.
//! Shapes of arbitrary client paths (a dynamic segment that is not an id)
//! would grow the table without end, so it stops learning at
//! [`MAX_SHAPES`]; later shapes are matched the slow way.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use actix_web::HttpRequest;

/// Shapes remembered per worker thread.
const MAX_SHAPES: usize = 1024;

thread_local! {
    static BY_SHAPE: RefCell<HashMap<String, Rc<str>>> = RefCell::new(HashMap::new());
}

/// The route template `req` matched, or `None` if it matched no route.
pub fn route_template(req: &HttpRequest) -> Option<Rc<str>> {
    let shape = shape_of(req.path());
    if let Some(template) = BY_SHAPE.with(|known| known.borrow().get(&shape).cloned()) {
        return Some(template);
    }
    let template: Rc<str> = req.match_pattern()?.into();
    BY_SHAPE.with(|known| {
        let mut known = known.borrow_mut();
        if known.len() < MAX_SHAPES {
            known.insert(shape, template.clone());
        }
    });
    Some(template)
}

/// `path` with every segment that is a UUID replaced by `{}`.
fn shape_of(path: &str) -> String {
    let mut shape = String::with_capacity(path.len());
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            shape.push('/');
        }
        shape.push_str(if is_uuid(segment) { "{}" } else { segment });
    }
    shape
}

/// Whether `segment` is a hyphenated UUID (any version, either case).
fn is_uuid(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_blanked_and_everything_else_kept() {
        assert_eq!(
            shape_of("/organizations/01a2056d-3e90-7001-8582-953eb3763d2b/roles"),
            "/organizations/{}/roles"
        );
        assert_eq!(
            shape_of("/organizations/01A2056D-3E90-7001-8582-953EB3763D2B/roles/x"),
            "/organizations/{}/roles/x"
        );
        assert_eq!(
            shape_of("/organizations/not-an-id/roles"),
            "/organizations/not-an-id/roles"
        );
        assert_eq!(shape_of("/"), "/");
        assert_eq!(shape_of(""), "");
        assert!(!is_uuid("01a2056d-3e90-7001-8582-953eb3763d2"));
        assert!(!is_uuid("01a2056d+3e90-7001-8582-953eb3763d2b"));
        assert!(!is_uuid("01a2056g-3e90-7001-8582-953eb3763d2b"));
    }
}
