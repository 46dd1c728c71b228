// rlfleet: one Adam step through ATen's fused kernel (`_fused_adam_`), which
// tch 0.24 does not expose. Called from `agents/adam.rs`; the tensors are
// tch's (`torch::Tensor*`). Returns null, or the exception's message (valid
// until the next call on the same thread).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <string>

extern "C" const char *rlfleet_fused_adam(at::Tensor *param, const at::Tensor *grad,
                                          at::Tensor *exp_avg, at::Tensor *exp_avg_sq,
                                          double step, double lr, double beta1, double beta2,
                                          double eps) {
    static thread_local std::string error;
    try {
        c10::NoGradGuard no_grad;
        at::Tensor steps = at::scalar_tensor(step, param->options());
        at::_fused_adam_({*param}, {*grad}, {*exp_avg}, {*exp_avg_sq}, {}, {steps}, lr, beta1,
                         beta2, /*weight_decay=*/0.0, eps, /*amsgrad=*/false,
                         /*maximize=*/false);
        return nullptr;
    } catch (const std::exception &e) {
        error = e.what();
        return error.c_str();
    }
}
