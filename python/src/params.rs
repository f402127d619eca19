//! The build parameters from Python: `boundary` and the keyword arguments of `lidb.build`, named
//! as the CLI's flags. Unknown names raise `TypeError` (as Python does for an unexpected keyword
//! argument); values of the wrong type or out of range raise `TypeError` or `ValueError`, with
//! the range checks left to `Params::validate` so the messages are the library's.

use lidb_index::{Params, RmiRoot};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::index_error;

/// The keyword arguments `lidb.build` accepts besides `boundary`.
pub const NAMES: [&str; 7] = [
    "pgm_epsilon_recursive",
    "rs_radix_bits",
    "rmi_root",
    "lpa_threshold",
    "lpa_learning_step",
    "lpa_learning_rate",
    "fiting_fanout",
];

/// Parameters with the defaults of `Params::new`, overridden by `kwargs`, validated.
pub fn from_python(
    boundary: &Bound<'_, PyAny>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Params> {
    let mut params = Params::new(integer(boundary, "boundary")?);
    for (name, value) in kwargs.into_iter().flat_map(|d| d.iter()) {
        let name: String = name.extract()?;
        match name.as_str() {
            "pgm_epsilon_recursive" => params.pgm_epsilon_recursive = integer(&value, &name)?,
            "rs_radix_bits" => params.rs_radix_bits = integer(&value, &name)?,
            "rmi_root" => params.rmi_root = rmi_root(&value)?,
            "lpa_threshold" => {
                params.lpa_threshold = if value.is_none() {
                    None
                } else {
                    Some(integer(&value, &name)?)
                }
            }
            "lpa_learning_step" => params.lpa_learning_step = integer(&value, &name)?,
            "lpa_learning_rate" => {
                params.lpa_learning_rate = value.extract().map_err(|_| {
                    PyTypeError::new_err(format!("{name} must be a number, got {value}"))
                })?
            }
            "fiting_fanout" => params.fiting_fanout = integer(&value, &name)?,
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "unexpected parameter \"{name}\" (known: boundary, {})",
                    NAMES.join(", ")
                )));
            }
        }
    }
    params.validate().map_err(index_error)?;
    Ok(params)
}

/// A non-negative integer parameter that fits `T`; a bool is not an integer here.
fn integer<T: TryFrom<i128>>(value: &Bound<'_, PyAny>, name: &str) -> PyResult<T> {
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an integer, got a bool"
        )));
    }
    let wide: i128 = value
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be an integer, got {value}")))?;
    T::try_from(wide).map_err(|_| {
        PyValueError::new_err(format!(
            "invalid parameter: {name} {wide} is out of range (it must be a non-negative integer)"
        ))
    })
}

fn rmi_root(value: &Bound<'_, PyAny>) -> PyResult<RmiRoot> {
    let name: String = value.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "rmi_root must be \"linear\" or \"cubic\", got {value}"
        ))
    })?;
    match name.as_str() {
        "linear" => Ok(RmiRoot::Linear),
        "cubic" => Ok(RmiRoot::Cubic),
        _ => Err(PyValueError::new_err(format!(
            "invalid parameter: rmi_root \"{name}\" (known: linear, cubic)"
        ))),
    }
}
